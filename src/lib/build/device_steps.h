/* The device code's compile steps: for each target and each part of the device code
 * (libmsda.json device.parts), the PTX that cicc writes (one step shared by every target that
 * compiles the same PTX) and the image made from it (ptxas and fatbinary for
 * SASS, fatbinary for PTX, the kernels' script for the old drivers' PTX).
 * Scope: private to src/lib/build. */
#ifndef MD_DEVICE_STEPS_H
#define MD_DEVICE_STEPS_H

#include <stdbool.h>
#include "build_steps.h"
#include "plan.h"

/* What the device steps are made from: the build's plan and recipe and its folders. */
typedef struct {
    const md_plan *plan;
    const md_libmsda_recipe *recipe;
    const char *kernels_dir;    /* the sources' kernels/ */
    const char *source_dir;     /* the project folder, left out of cache keys */
    const char *cache_dir;      /* where the images are kept */
    const char *work_dir;       /* the build's work folder (its temporary folder is in it) */
    bool dry_run;               /* plan only: make no folder */
} md_device_inputs;

/* Appends the device steps of IN's plan to S: each PTX step before the images made from it,
 * and no PTX step where every image made from it is cached. IMAGE_STEP[i] is set to the index
 * in S of the step that writes target i / parts's fatbin of part i % parts (IN->plan->n_targets
 * times IN->recipe->parts entries). */
md_status md_device_steps_add(const md_device_inputs *in, md_step_list *s, size_t *image_step, md_error *err);

#endif
