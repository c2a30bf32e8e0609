/* main.c: the ptq binary: dispatches to subcommands (cli/cmd_*.c). Temporary stub. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ptq <command> [options]\n");
        return 2;
    }
    fprintf(stderr, "ptq: unknown command '%s'\n", argv[1]);
    return 2;
}
