/* placeholder: being written */
#include <stdio.h>

#include "bench.h"

int bench_acl(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "dpflow bench: not built yet\n");
	return 1;
}
