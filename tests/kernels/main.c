/* The libmsda CPU test suite (Check framework). */
#include <stdlib.h>

#include "kt.h"

int main(void) {
    Suite *s = suite_create("kernels");
    suite_add_tcase(s, kt_tcase_api());
    suite_add_tcase(s, kt_tcase_half());
    suite_add_tcase(s, kt_tcase_cpu());
    suite_add_tcase(s, kt_tcase_gradcheck());
    suite_add_tcase(s, kt_tcase_softmax());
    suite_add_tcase(s, kt_tcase_points());
    suite_add_tcase(s, kt_tcase_plan());
    suite_add_tcase(s, kt_tcase_launch());
    suite_add_tcase(s, kt_tcase_images());
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    const int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
