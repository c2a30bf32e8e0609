/* replay.c: a main() for the fuzz harnesses without libFuzzer, so that `make test` replays
 * the regression inputs with the normal toolchain. Each argument is a file, or a folder
 * whose files are all replayed; each is passed once to LLVMFuzzerTestOneInput.
 *
 *   build/fuzz-replay/fuzz_npy tests/fuzz/regress/npy build/fuzz-seeds/npy/a.npy
 *
 * Prints the number of inputs replayed; exits 1 when an input cannot be read (a crash
 * ends the process, as it would under libFuzzer). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REPLAY_BYTES ((size_t)1 << 26)

/* Replays one file; 0 on success. */
static int replay_file(const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (io_read_file(path, &buf, &len, MAX_REPLAY_BYTES) != PTQ_OK) {
        fprintf(stderr, "replay: %s\n", ptq_last_error());
        return 1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0, n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            bad |= replay_file(argv[i]);
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            bad = 1;
            continue;
        }
        for (struct dirent *e; (e = readdir(d));) {
            char path[4096];
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
            bad |= replay_file(path);
            n++;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", n);
    return bad;
}
