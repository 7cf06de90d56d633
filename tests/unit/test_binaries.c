/* The lesson binaries as a student runs them. GPU checks skip (with the
 * reason) when no NVIDIA GPU is present; run with --jobs 1, they share the GPU. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include "attention.h"

static int sh(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
static int have_gpu(void) { return sh("nvidia-smi -L >/dev/null 2>&1") == 0; }

Test(binaries, lesson1_starter_says_not_implemented) {
    cr_assert_eq(sh("./lesson1 --check-only >/dev/null"), EXIT_NOT_IMPLEMENTED);
}

Test(binaries, solution1_passes_on_the_cpu) {
    cr_assert_eq(sh("./solution1 --check-only >/dev/null"), EXIT_PASS);
}

Test(binaries, bad_command_line_exits_2) {
    cr_assert_eq(sh("./solution1 --reps 0 2>/dev/null"), EXIT_USAGE);
    cr_assert_eq(sh("./solution2 --seq -5 2>/dev/null"), EXIT_USAGE);
    cr_assert_eq(sh("./solution2 --causal 2>/dev/null"), EXIT_USAGE);
    cr_assert_eq(sh("./solution2 --dim 48 2>/dev/null"), EXIT_USAGE);
    cr_assert_eq(sh("./solution1 --ranks 2 2>/dev/null"), EXIT_USAGE);  /* only a lesson that runs over ranks takes it */
    cr_assert_eq(sh("./solution2 --ranks 2 2>/dev/null"), EXIT_USAGE);
}

Test(binaries, lesson2_without_gpu_says_so) {
    if (have_gpu()) cr_skip_test("a GPU is present: the no-GPU message cannot be checked here");
    cr_assert_eq(sh("./lesson2 2>&1 | grep -q 'no NVIDIA driver/GPU found'"), 0);
    cr_assert_eq(sh("./lesson2 >/dev/null 2>&1"), EXIT_NO_GPU);
}

/* Every solution passes the grader on a GPU. */
Test(gpu, solutions_pass, .timeout = 1800) {
    if (!have_gpu()) cr_skip_test("no NVIDIA driver/GPU found: GPU grading skipped (run make grade SOLUTIONS=1 on a GPU)");
    cr_assert_eq(sh("make -s grade SOLUTIONS=1 > build/test-grade.log 2>&1"), 0, "see build/test-grade.log");
}

Test(gpu, starters_are_not_implemented) {
    if (!have_gpu()) cr_skip_test("no NVIDIA driver/GPU found: starter check skipped");
    cr_assert_eq(sh("./lesson2 --check-only >/dev/null 2>&1"), EXIT_NOT_IMPLEMENTED);
}
