/* The device code's compile steps: for each target, the PTX that cicc writes (one step shared by
 * every target that compiles the same PTX) and the image made from it (ptxas and fatbinary for
 * SASS, fatbinary for PTX, the kernels' script for the old drivers' PTX).
 * Scope: private to src/lib/build. */
#ifndef MD_DEVICE_STEPS_H
#define MD_DEVICE_STEPS_H

#include "build.h"
#include "build_steps.h"

/* Appends the device steps of CFG's plan to S: each PTX step before the images made from it,
 * and no PTX step where every image made from it is cached. IMAGE_STEP[i] is set to the index
 * in S of the step that writes target i's fatbin (CFG->plan->n_targets entries). */
md_status md_device_steps_add(const md_build_config *cfg, md_step_list *s, size_t *image_step, md_error *err);

#endif
