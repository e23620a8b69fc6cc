/* SPDX-License-Identifier: MIT */
/* service.c - activation file parser (see service.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/service.h"
#include "protocol/ctrl.h"
#include "util/array.h"
#include "util/lines.h"

struct service_set {
	struct service *s;
	size_t n, alloc;
};

void service_deinit(struct service *s)
{
	if (!s)
		return;
	free(s->name);
	free(s->unit);
	free(s->exec);
	free(s->user);
	free(s->file);
	s->name = s->unit = s->exec = s->user = s->file = NULL;
}

static bool unit_name_is_valid(const char *u)
{
	size_t l = strlen(u);

	if (l < 9 || l > 255 || strcmp(u + l - 8, ".service") != 0 || u[0] == '-')
		return false;
	for (const char *p = u; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr(":-_.\\@", *p)))
			return false;
	return true;
}

int service_parse_string(struct service *ret, const char *file, const char *text, char *err, size_t err_len)
{
	struct service s = { 0 };
	struct line_reader lr;
	const char *base;
	bool section = false, dbus = false;
	char *l, *eq;
	int r;

	if (!ret || !file || !text)
		return -EINVAL;
	line_reader_init(&lr, text, "#;", 0);
	while ((r = line_reader_next(&lr, &l)) != 0) {
		if (r == -E2BIG) {
			r = line_fail(err, err_len, file, lr.line, "line too long");
			goto fail;
		}
		if (strcmp(l, "[Service]") == 0 || strcmp(l, "[D-BUS Service]") == 0) {
			section = true;
			dbus = l[1] == 'D';
			continue;
		}
		if (*l == '[') {
			r = line_fail(err, err_len, file, lr.line, "unknown section %s", l);
			goto fail;
		}
		if (!section) {
			r = line_fail(err, err_len, file, lr.line, "assignment outside [Service]");
			goto fail;
		}
		eq = strchr(l, '=');
		if (!eq) {
			r = line_fail(err, err_len, file, lr.line, "expected KEY=VALUE");
			goto fail;
		}
		*eq++ = 0;
		if (strcmp(l, "Name") == 0) {
			if (!ctrl_name_is_valid_wellknown(eq)) {
				r = line_fail(err, err_len, file, lr.line, "invalid name '%s'", eq);
				goto fail;
			}
			free(s.name);
			s.name = strdup(eq);
		} else if (strcmp(l, "SystemdService") == 0) {
			if (!unit_name_is_valid(eq)) {
				r = line_fail(err, err_len, file, lr.line,
					      "invalid unit '%s' (want NAME.service)", eq);
				goto fail;
			}
			free(s.unit);
			s.unit = strdup(eq);
		} else if (dbus && strcmp(l, "Exec") == 0) {
			free(s.exec);
			s.exec = strdup(eq);
			if (!s.exec) {
				r = -ENOMEM;
				goto fail;
			}
			continue;
		} else if (dbus && strcmp(l, "User") == 0) {
			free(s.user);
			s.user = strdup(eq);
			if (!s.user) {
				r = -ENOMEM;
				goto fail;
			}
			continue;
		} else if (dbus && strcmp(l, "AssumedAppArmorLabel") == 0) {
			/* for dbus-daemon's AppArmor mediation, which brokerd does not do */
			continue;
		} else {
			r = line_fail(err, err_len, file, lr.line, "unknown key '%s'", l);
			goto fail;
		}
		if ((strcmp(l, "Name") == 0 && !s.name) || (strcmp(l, "SystemdService") == 0 && !s.unit)) {
			r = -ENOMEM;
			goto fail;
		}
	}
	if (dbus && s.name && !s.unit && !s.exec) {
		r = line_fail(err, err_len, file, lr.line, "Name= and SystemdService= or Exec= are required");
		goto fail;
	}
	if (!s.name || (!s.unit && !dbus)) {
		r = line_fail(err, err_len, file, lr.line, "Name= and SystemdService= are required");
		goto fail;
	}
	base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (strncmp(base, s.name, strlen(s.name)) != 0 || strcmp(base + strlen(s.name), ".service") != 0) {
		r = line_fail(err, err_len, file, lr.line, "file must be named %s.service", s.name);
		goto fail;
	}
	s.file = strdup(file);
	if (!s.file) {
		r = -ENOMEM;
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	service_deinit(&s);
	return r;
}

struct service_set *service_set_free(struct service_set *set)
{
	if (!set)
		return NULL;
	for (size_t i = 0; i < set->n; i++)
		service_deinit(&set->s[i]);
	free(set->s);
	free(set);
	return NULL;
}

const struct service *service_set_find(const struct service_set *set, const char *name)
{
	for (size_t i = 0; set && name && i < set->n; i++)
		if (strcmp(set->s[i].name, name) == 0)
			return &set->s[i];
	return NULL;
}

size_t service_set_count(const struct service_set *set)
{
	return set ? set->n : 0;
}

const struct service *service_set_get(const struct service_set *set, size_t i)
{
	return set && i < set->n ? &set->s[i] : NULL;
}

int service_set_load(struct service_set **ret, const char *const *dirs, unsigned int *n_bad, char *err,
		     size_t err_len)
{
	struct service_set *set;

	if (!ret || !dirs)
		return -EINVAL;
	set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	if (n_bad)
		*n_bad = 0;
	for (size_t d = 0; dirs[d]; d++) {
		DIR *dir = opendir(dirs[d]);
		struct dirent *de;

		if (!dir)
			continue;
		while ((de = readdir(dir))) {
			char path[4096], text[8192];
			struct service s;
			size_t k, l = strlen(de->d_name);
			FILE *f;

			if (de->d_name[0] == '.' || l < 9 || strcmp(de->d_name + l - 8, ".service") != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dirs[d], de->d_name);
			f = fopen(path, "re");
			if (!f)
				continue;
			k = fread(text, 1, sizeof(text) - 1, f);
			(void)fclose(f);
			text[k] = 0;
			if (service_parse_string(&s, path, text, err, err_len) < 0) {
				if (n_bad)
					(*n_bad)++;
				continue;
			}
			if (service_set_find(set, s.name)) { /* masked by an earlier dir */
				service_deinit(&s);
				continue;
			}
			if (ARRAY_RESERVE(set->s, set->alloc, set->n + 1) < 0) {
				service_deinit(&s);
				closedir(dir);
				service_set_free(set);
				return -ENOMEM;
			}
			set->s[set->n++] = s;
		}
		closedir(dir);
	}
	*ret = set;
	return 0;
}
