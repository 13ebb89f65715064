/*
 * `dayshard run`: placeholder while issue 3 is in progress; replaced by the real command.
 */
#include "cli/cli.h"

const char cmd_run_usage[] = "usage: dayshard run ... (in progress, issue 3)\n";

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error("run", CLI_FAIL, "not available yet (issue 3 is in progress)");
}
