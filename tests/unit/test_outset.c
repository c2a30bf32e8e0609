/* test_outset.c: output sets (io/file.h): nothing is renamed before the commit, a failing output
 * discards the set (the previous files stay byte for byte), the primary output is renamed last,
 * writes outside a set are committed at once, and no temporary file is left in the folder,
 * with O_TMPFILE and with named temporary files (PTQ_TMPFILE=named). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file.h"
#include "tests/test.h"
#include "tests/unit/files.h"

#define DIR_ "build/tmp/outset"

static int same(const char *path, const char *text)
{
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    int ok = b && n == strlen(text) && memcmp(b, text, n) == 0;
    free(b);
    return ok;
}

static int temps_left(void)
{
    int n = 0;
    DIR *d = opendir(DIR_);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".ptq.tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static void old_set(void)
{
    EXPECT(write_bytes(DIR_ "/a.onnx", "old model", 9));
    EXPECT(write_bytes(DIR_ "/a.cache", "old cache", 9));
}

static void commit_renames_together(void)
{
    old_set();
    io_outset *set;
    EXPECT_EQ_INT(io_outset_begin(&set, NULL), PTQ_OK);
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/a.onnx", "new model", 9), PTQ_OK);
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/a.cache", "new cache", 9), PTQ_OK);
    EXPECT_EQ_INT(io_outset_pending(set), 2);
    EXPECT(same(DIR_ "/a.onnx", "old model")); /* nothing renamed before the commit */
    EXPECT(same(DIR_ "/a.cache", "old cache"));
    EXPECT_EQ_INT(io_outset_commit(set, DIR_ "/a.onnx"), PTQ_OK);
    EXPECT(same(DIR_ "/a.onnx", "new model"));
    EXPECT(same(DIR_ "/a.cache", "new cache"));
    struct stat m, c; /* the primary output renamed last: its change time is not before the cache's */
    EXPECT(stat(DIR_ "/a.onnx", &m) == 0 && stat(DIR_ "/a.cache", &c) == 0);
    EXPECT(m.st_ctim.tv_sec > c.st_ctim.tv_sec || (m.st_ctim.tv_sec == c.st_ctim.tv_sec && m.st_ctim.tv_nsec >= c.st_ctim.tv_nsec));
    EXPECT_EQ_INT(io_outset_pending(set), 0);
    io_outset_free(set);
    EXPECT_EQ_INT(temps_left(), 0);
}

TEST(a_set_is_renamed_only_at_its_commit) { commit_renames_together(); }

TEST(named_temporary_files_too)
{
    setenv("PTQ_TMPFILE", "named", 1);
    commit_renames_together();
    /* while a set is open its named files exist; freeing it uncommitted removes them */
    io_outset *set;
    EXPECT_EQ_INT(io_outset_begin(&set, NULL), PTQ_OK);
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/a.onnx", "newer", 5), PTQ_OK);
    EXPECT_EQ_INT(temps_left(), 1);
    io_outset_free(set);
    EXPECT_EQ_INT(temps_left(), 0);
    EXPECT(same(DIR_ "/a.onnx", "new model"));
    unsetenv("PTQ_TMPFILE");
}

TEST(a_failing_output_discards_the_set)
{
    old_set();
    io_outset *set;
    EXPECT_EQ_INT(io_outset_begin(&set, NULL), PTQ_OK);
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/a.onnx", "new model", 9), PTQ_OK);
    /* a folder that does not exist: the error names the output and the system's reason */
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/no/such/a.cache", "x", 1), PTQ_ERR_IO);
    EXPECT(strstr(ptq_last_error(), DIR_ "/no/such/a.cache") && strstr(ptq_last_error(), "No such file or directory"));
    io_outset_free(set); /* what the CLI does with a failed command's set */
    EXPECT(same(DIR_ "/a.onnx", "old model"));
    EXPECT(same(DIR_ "/a.cache", "old cache"));
    EXPECT_EQ_INT(temps_left(), 0);
}

TEST(a_folder_in_the_way_fails_before_any_rename)
{
    old_set();
    mkdir(DIR_ "/in_the_way", 0777);
    io_outset *set;
    EXPECT_EQ_INT(io_outset_begin(&set, NULL), PTQ_OK);
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/a.cache", "new cache", 9), PTQ_OK);
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/in_the_way", "x", 1), PTQ_OK);
    EXPECT_EQ_INT(io_outset_commit(set, NULL), PTQ_ERR_IO);
    EXPECT(strstr(ptq_last_error(), "in_the_way: is a folder; no output written (the previous files are unchanged)"));
    io_outset_free(set);
    EXPECT(same(DIR_ "/a.cache", "old cache"));
    EXPECT_EQ_INT(temps_left(), 0);
    rmdir(DIR_ "/in_the_way");
}

TEST(outside_a_set_each_write_is_committed_at_once)
{
    old_set();
    EXPECT_EQ_INT(io_write_atomic(DIR_ "/a.cache", "new cache", 9), PTQ_OK);
    EXPECT(same(DIR_ "/a.cache", "new cache"));
    io_atomic_file f;
    EXPECT_EQ_INT(io_atomic_open(&f, DIR_ "/a.onnx"), PTQ_OK);
    fputs("streamed", f.fp);
    io_atomic_abort(&f); /* discarded: the previous file stays */
    EXPECT(same(DIR_ "/a.onnx", "old model"));
    EXPECT_EQ_INT(temps_left(), 0);
}

int main(void)
{
    if (system("rm -rf " DIR_ " && mkdir -p " DIR_) != 0) return 1;
    RUN(a_set_is_renamed_only_at_its_commit);
    RUN(named_temporary_files_too);
    RUN(a_failing_output_discards_the_set);
    RUN(a_folder_in_the_way_fails_before_any_rename);
    RUN(outside_a_set_each_write_is_committed_at_once);
    return test_summary();
}
