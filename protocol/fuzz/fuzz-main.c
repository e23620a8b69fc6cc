/* SPDX-License-Identifier: MIT */
/*
 * fuzz-main.c - standalone driver for libFuzzer targets, so gcc builds
 * compile them and meson test replays their corpus as regression tests.
 * Arguments are files or directories (every regular file inside is run).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "protocol/fuzz/fuzz.h"

static int run_file(const char *path)
{
	uint8_t *buf;
	FILE *f;
	long n;

	f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int count = 0;
	struct stat st;

	for (int i = 1; i < argc; i++) {
		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			struct dirent *de;
			char path[4096];

			if (!d)
				return 1;
			while ((de = readdir(d))) {
				if (de->d_name[0] == '.')
					continue;
				snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
				if (run_file(path) < 0)
					return 1;
				count++;
			}
			closedir(d);
		} else {
			if (run_file(argv[i]) < 0)
				return 1;
			count++;
		}
	}
	printf("replayed %u inputs\n", count);
	return 0;
}
