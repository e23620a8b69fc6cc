/* SPDX-License-Identifier: MIT */
/*
 * service.h - activation files: /usr/share/brokerd/services/NAME.service
 *
 *   [Service]
 *   Name=org.example.Echo
 *   SystemdService=example-echo.service
 *
 * The file name must be NAME.service. D-Bus service files ("[D-BUS Service]",
 * /usr/share/dbus-1/system-services) are read too, with their Exec= line
 * (what the D-Bus front end runs when there is no systemd to start the unit,
 * dbus-activation.c) and User= (whom it runs that as, on a system bus);
 * AssumedAppArmorLabel= is read and not used. A native file needs
 * SystemdService=, a D-Bus one SystemdService= or Exec=. Pure parsing, plus
 * reading a directory.
 */
#ifndef BROKERD_SERVICE_H
#define BROKERD_SERVICE_H

#include <stddef.h>

#define SERVICE_DIR_ETC	   "/etc/brokerd/services"
#define SERVICE_DIR_VENDOR "/usr/share/brokerd/services"

struct service {
	char *name;
	char *unit; /* NULL: Exec= only (a D-Bus service file) */
	char *exec; /* the D-Bus file's Exec=, as written; NULL if none */
	char *user; /* the D-Bus file's User=; NULL if none */
	char *file;
};

struct service_set;

/* -EINVAL with "FILE:LINE: reason" in err for a bad file. */
int service_parse_string(struct service *ret, const char *file, const char *text, char *err, size_t err_len);
void service_deinit(struct service *s);

/*
 * Load every NAME.service of dirs (earlier dirs mask later ones). A bad file
 * is skipped and reported in err (the last one), and counted in *n_bad.
 */
int service_set_load(struct service_set **ret, const char *const *dirs, unsigned int *n_bad, char *err,
		     size_t err_len);
struct service_set *service_set_free(struct service_set *s);
const struct service *service_set_find(const struct service_set *s, const char *name);
size_t service_set_count(const struct service_set *s);
const struct service *service_set_get(const struct service_set *s, size_t i);

#endif
