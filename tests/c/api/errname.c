/*
** errname.c -- px_errname and the header agree: every "#define PX_E<NAME> (n)"
** line of parataxis.h (argv[1]) has px_errname(n) == "E<NAME>" and a sentence
** of its own in px_strerror, and px_errname names no other code (0, the
** codes past the last one and positive ones are "EUNKNOWN").  The table in
** error.c is written by hand beside px_strerror's; this is what keeps it true.
*/
#include "../check.h"

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    FILE *h = fopen(argv[1], "r");
    CHECK(h != NULL);
    char line[512], name[64];
    int code, defined = 0, lowest = 0;
    while (fgets(line, sizeof line, h) != NULL) {
        if (sscanf(line, "#define PX_%63[A-Z] (%d)", name, &code) != 2 || name[0] != 'E')
            continue;
        if (strcmp(px_errname(code), name) != 0) {
            fprintf(stderr, "px_errname(%d) is %s, the header says PX_%s\n", code,
                    px_errname(code), name);
            return 1;
        }
        CHECK(strcmp(px_strerror(code), "unknown error") != 0);
        defined++;
        lowest = code < lowest ? code : lowest;
    }
    fclose(h);
    CHECK(defined >= 14);
    CHECK_EQ(lowest, -defined);                  /* -1 .. -n, none missing */
    CHECK(strcmp(px_errname(0), "EUNKNOWN") == 0);
    CHECK(strcmp(px_errname(1), "EUNKNOWN") == 0);
    CHECK(strcmp(px_errname(lowest - 1), "EUNKNOWN") == 0);
    for (int c = -1000; c < lowest; c++)
        CHECK(strcmp(px_errname(c), "EUNKNOWN") == 0);
    printf("base.errname: %d codes named as the header spells them\n", defined);
    return 0;
}
