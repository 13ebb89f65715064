/*
 * `dayshard produce`: placeholder while issue 3 is in progress; replaced by the real command.
 */
#include "cli/cli.h"

const char cmd_produce_usage[] = "usage: dayshard produce ... (in progress, issue 3)\n";

int cmd_produce(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error("produce", CLI_FAIL, "not available yet (issue 3 is in progress)");
}
