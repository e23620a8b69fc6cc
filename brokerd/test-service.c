/* SPDX-License-Identifier: MIT */
/* test-service.c - unit tests of the activation file parser (service.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brokerd/service.h"
#include "util/test.h"

static void bad(const char *text, const char *msg)
{
	struct service s;
	char err[256] = "";

	ASSERT(service_parse_string(&s, "/d/org.x.Echo.service", text, err, sizeof(err)) == -EINVAL);
	ASSERT_STR(err, msg);
}

int main(void)
{
	struct service s;
	char err[256];

	ASSERT(service_parse_string(&s, "/d/org.x.Echo.service",
				    "# c\n[Service]\nName=org.x.Echo\nSystemdService=x-echo.service\n", err,
				    sizeof(err)) == 0);
	ASSERT(strcmp(s.name, "org.x.Echo") == 0 && strcmp(s.unit, "x-echo.service") == 0);
	service_deinit(&s);

	/* D-Bus service files: Exec= and User= kept, AssumedAppArmorLabel= read and not used */
	ASSERT(service_parse_string(&s, "/d/org.x.Echo.service",
				    "[D-BUS Service]\nName=org.x.Echo\nExec=/bin/false\nUser=root\n"
				    "AssumedAppArmorLabel=unconfined\nSystemdService=x-echo.service\n",
				    err, sizeof(err)) == 0);
	ASSERT(strcmp(s.name, "org.x.Echo") == 0 && strcmp(s.unit, "x-echo.service") == 0);
	ASSERT(strcmp(s.exec, "/bin/false") == 0 && strcmp(s.user, "root") == 0);
	service_deinit(&s);
	/* Exec= alone: run by the D-Bus front end when there is no unit */
	ASSERT(service_parse_string(&s, "/d/org.x.Echo.service",
				    "[D-BUS Service]\nName=org.x.Echo\nExec=/bin/echo 'a b'\n", err,
				    sizeof(err)) == 0);
	ASSERT(!s.unit && !s.user && strcmp(s.exec, "/bin/echo 'a b'") == 0);
	service_deinit(&s);
	bad("[D-BUS Service]\nName=org.x.Echo\nUser=root\n",
	    "/d/org.x.Echo.service:3: Name= and SystemdService= or Exec= are required");
	bad("[D-BUS Service]\nName=org.x.Echo\nSystemdService=x.service\nBogus=1\n",
	    "/d/org.x.Echo.service:4: unknown key 'Bogus'");
	bad("Name=org.x.Echo\n", "/d/org.x.Echo.service:1: assignment outside [Service]");
	bad("[Service]\nName=org.x.Echo\n",
	    "/d/org.x.Echo.service:2: Name= and SystemdService= are required");
	bad("[Service]\nName=org.x.Other\nSystemdService=a.service\n",
	    "/d/org.x.Echo.service:3: file must be named org.x.Other.service");
	bad("[Service]\nName=org.x.Echo\nSystemdService=a.socket\n",
	    "/d/org.x.Echo.service:3: invalid unit 'a.socket' (want NAME.service)");
	bad("[Service]\nName=org.x.Echo\nSystemdService=a b.service\n",
	    "/d/org.x.Echo.service:3: invalid unit 'a b.service' (want NAME.service)");
	bad("[Service]\nExec=/bin/sh\n", "/d/org.x.Echo.service:2: unknown key 'Exec'");
	bad("[Service]\nName\n", "/d/org.x.Echo.service:2: expected KEY=VALUE");
	bad("[Unit]\n", "/d/org.x.Echo.service:1: unknown section [Unit]");
	/* comments are whole lines starting with '#' or ';'; in a value '#' is kept */
	bad("; c\n[Service]\n  # c\nName=org.x.Echo # c\n",
	    "/d/org.x.Echo.service:4: invalid name 'org.x.Echo # c'");
	{
		static char long_line[2048] = "[Service]\nName=";

		memset(long_line + strlen(long_line), 'x', 1100);
		bad(long_line, "/d/org.x.Echo.service:2: line too long");
	}
	printf("test-service: ok\n");
	return 0;
}
