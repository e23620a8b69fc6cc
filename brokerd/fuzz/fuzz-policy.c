/* SPDX-License-Identifier: MIT */
/*
 * fuzz-policy.c - libFuzzer target for the policy file parser and the
 * activation file parser (first byte picks which), followed by evaluation.
 * A parse either fails cleanly or yields a policy that answers every check.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/policy.h"
#include "brokerd/service.h"
#include "protocol/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256], *text;
	struct policy *p;
	struct service s;
	gid_t gids[] = { 2100, 0 };

	if (size < 1 || size > 65536)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = 0;
	if (data[0] & 1) {
		if (service_parse_string(&s, "/x/org.example.Fuzz.service", text, err, sizeof(err)) == 0)
			service_deinit(&s);
	} else if (policy_new(&p) == 0) {
		if (policy_parse_string(p, "fuzz.conf", text, err, sizeof(err)) == 0) {
			for (int a = 0; a < _POLICY_ACTION_MAX; a++) {
				policy_check(p, 2001, gids, 1, a, "org.example.Foo", err, sizeof(err));
				policy_check(p, 0, gids + 1, 1, a, "org.example", err, sizeof(err));
				policy_check(p, 2002, NULL, 0, a, "a.b", NULL, 0);
			}
		}
		policy_free(p);
	}
	free(text);
	return 0;
}
