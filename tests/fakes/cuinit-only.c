/* A library that has cuInit and nothing else of the driver API: the nearest thing to a driver
 * that msda-doctor must still refuse (it asks cuDriverGetVersion before cuInit). */
int cuInit(unsigned int flags);

__attribute__((visibility("default"))) int cuInit(unsigned int flags)
{
    (void)flags;
    return 0;
}
