/* SPDX-License-Identifier: MIT */
/*
 * credcheck.c - a service that decides per caller from kernel-verified
 * credentials.
 *
 * Shows: brokerd_msg_get_creds() on a call: the uid, gid and pid were stamped
 * by the kernel when the caller sent the message, and the sender's unique
 * name comes from the badge brokerd minted into the caller's capability, so
 * a caller cannot claim to be someone else. The service serves the uids
 * given on the command line (default: root and alice, 2001) and refuses
 * everyone else with an error reply. Policy lets everybody call it; the
 * finer decision is the service's own.
 *
 *   credcheck [UID...]     serves org.brokerd.example.Creds:
 *                          Whoami -> "hello UID (pid P, :1.N)"
 *                          Quit (root only) -> exits
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brokerd/brokerd.h>

#define NAME "org.brokerd.example.Creds"

static uid_t allowed[32];
static int n_allowed;

static int on_whoami(brokerd_msg *call, void *userdata)
{
	struct brokerd_creds c;
	char text[128];
	int r;

	r = brokerd_msg_get_creds(call, &c);
	if (r < 0)
		return brokerd_msg_reply_error(call, "org.brokerd.example.Error.NoCredentials",
					       "the kernel stamped no credentials");
	for (int i = 0; i < n_allowed; i++)
		if (allowed[i] == c.uid) {
			snprintf(text, sizeof(text), "hello %u (pid %d, %s)", (unsigned)c.uid, (int)c.pid,
				 brokerd_msg_get_sender(call));
			printf("credcheck: served uid %u\n", (unsigned)c.uid);
			fflush(stdout);
			return brokerd_msg_reply(call, text, strlen(text));
		}
	snprintf(text, sizeof(text), "uid %u is not served here", (unsigned)c.uid);
	printf("credcheck: refused uid %u\n", (unsigned)c.uid);
	fflush(stdout);
	return brokerd_msg_reply_error(call, "org.brokerd.example.Error.NotAllowed", text);
}

static int on_quit(brokerd_msg *call, void *userdata)
{
	struct brokerd_creds c;

	if (brokerd_msg_get_creds(call, &c) < 0 || c.uid != 0)
		return brokerd_msg_reply_error(call, "org.brokerd.example.Error.NotAllowed",
					       "only root may stop the service");
	brokerd_msg_reply(call, "bye", 3);
	brokerd_bus_exit(userdata, 0);
	return 0;
}

int main(int argc, char **argv)
{
	brokerd_bus *bus = NULL;
	int r;

	for (int i = 1; i < argc && n_allowed < 32; i++)
		allowed[n_allowed++] = (uid_t)strtoul(argv[i], NULL, 10);
	if (n_allowed == 0) {
		allowed[n_allowed++] = 0;
		allowed[n_allowed++] = 2001;
	}
	r = brokerd_bus_open_system(&bus);
	if (r < 0) {
		fprintf(stderr, "credcheck: connect: %s\n", strerror(-r));
		return 1;
	}
	brokerd_bus_add_method(bus, NULL, NAME, "Whoami", on_whoami, NULL);
	brokerd_bus_add_method(bus, NULL, NAME, "Quit", on_quit, bus);
	r = brokerd_bus_request_name(bus, NAME, BROKERD_NAME_DO_NOT_QUEUE);
	if (r != BROKERD_NAME_PRIMARY_OWNER) {
		fprintf(stderr, "credcheck: cannot own %s: %s\n", NAME, r < 0 ? strerror(-r) : "queued");
		return 1;
	}
	printf("credcheck: serving %s\n", NAME);
	fflush(stdout);
	r = brokerd_bus_run(bus);
	brokerd_bus_close(bus);
	return r < 0 ? 1 : 0;
}
