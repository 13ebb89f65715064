/*
 * `dayshard broker`: placeholder while issue 3 is in progress; replaced by the real command.
 */
#include "cli/cli.h"

const char cmd_broker_usage[] = "usage: dayshard broker ... (in progress, issue 3)\n";

int cmd_broker(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_error("broker", CLI_FAIL, "not available yet (issue 3 is in progress)");
}
