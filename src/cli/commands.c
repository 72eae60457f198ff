/* The command table: adding a command is one file, one row here, one section in the man page. */
#include <string.h>
#include "cli.h"

const md_command md_commands[] = {
    { "inspect", cmd_inspect,
      "Tell what GPU code a binary carries and where it can run",
      "inspect [--json] [-v] [--gpu ARCH]... FILE|DIR...",
      "  FILE|DIR         ELF executable, shared object or object, .fatbin, .cubin, .whl, or a\n"
      "                   directory searched for them\n"
      "  --gpu ARCH       also say whether the code runs there and whether each kernel's\n"
      "                   registers fit one block (sm_61, 6.1, or a name: p40, tx2, orin, h100);\n"
      "                   repeatable\n"
      "  --json           print JSON instead of text\n"
      "  -v, --verbose    list every fatbin entry and kernel\n"
      "  -h, --help       show this help\n" },
    { "build", cmd_build,
      "Compile the MSDA kernels for every architecture and package them per CPU platform",
      "build [--json] [--dry-run] [--arch SPEC] [--platform LIST] [--toolkit DIR]... [--define NAME=VALUE]... [-j N] [--source DIR] [--out DIR] [--cache DIR]",
      "  --arch SPEC      all (every architecture the toolkits target, plus PTX of the newest and\n"
      "                   of the oldest of the newest toolkit),\n"
      "                   native (the GPUs here), or a list: sm_61,8.6,orin; '+PTX' after an\n"
      "                   architecture adds its PTX (default: all)\n"
      "  --platform LIST  x86_64, aarch64 or both (default: this machine's, and the other when its\n"
      "                   cross compiler is installed)\n"
      "  --toolkit DIR    a CUDA toolkit (DIR/bin/nvcc) to use beside those found; repeatable\n"
      "  --define NAME=VALUE\n"
      "                   set a device-code macro for every target (a knob of\n"
      "                   kernels/libmsda.json, or another); repeatable\n"
      "  -j, --jobs N     compilations at a time (default: the number of cores)\n"
      "  --source DIR     the project folder with kernels/ and wheels/ (default: .)\n"
      "  --out DIR        where the wheels go (default: wheels/dist)\n"
      "  --cache DIR      compiled objects by content (default: build/msda-cache)\n"
      "  --dry-run        print the plan and the exact commands, run nothing\n"
      "  --json           print JSON instead of text\n"
      "  -h, --help       show this help\n" },
    { "verify", cmd_verify,
      "Check a built wheel here: its RECORD, and its kernels on the CPU and every GPU",
      "verify [--json] WHEEL",
      "  WHEEL            a wheel written by 'msda-doctor build'\n"
      "  --json           print JSON instead of text\n"
      "  -h, --help       show this help\n" },
    { "diagnose", cmd_diagnose,
      "Probe this machine, read failing logs, and name each cause and the command that fixes it",
      "diagnose [--json] [-v] [--list] [--no-probe] [--python PATH] [--search DIR]... [--root DIR] [LOG...|-]",
      "  LOG              a build or run log to explain; '-' reads standard input\n"
      "  --python PATH    the Python whose torch and installed op to probe (default: python3)\n"
      "  --search DIR     also look for MSDA binaries (MultiScaleDeformableAttention*.so, msda\n"
      "                   wheels, mmcv/detrex/GroundingDINO copies) under DIR; repeatable\n"
      "  --root DIR       read /etc/nv_tegra_release, /proc and library folders under DIR\n"
      "                   (default: /, or $MSDA_ROOT)\n"
      "  --no-probe       read the logs only; probe nothing on this machine\n"
      "  --list           list every check and finding ID, and exit\n"
      "  --json           print JSON instead of text\n"
      "  -v, --verbose    show every detail of the checks\n"
      "  -h, --help       show this help\n" },
    { "help", cmd_help,
      "Show the help of msda-doctor or of one command",
      "help [--json] [COMMAND]",
      "  COMMAND          the command to describe\n"
      "  --json           print the commands and their usage as JSON\n" },
    { NULL, NULL, NULL, NULL, NULL }
};

const md_command *md_command_find(const char *name)
{
    for (const md_command *c = md_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}
