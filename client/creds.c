/* SPDX-License-Identifier: MIT */
/*
 * creds.c - what brokerd recorded about a peer when it connected
 * (GET_CREDENTIALS): pid, uid, gid, supplementary groups, a pidfd and the
 * security label, for programs that decide who may do what, as D-Bus's
 * GetConnectionCredentials serves them. brokerd_bus_get_creds() is the older
 * fixed-size subset and is answered from the same reply.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/bus-control.h"
#include "client/bus-internal.h"

struct brokerd_credentials {
	uint32_t mask; /* CTRL_CREDS_*: what brokerd reported */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	size_t n_groups;
	int pidfd;   /* owned; -1 when brokerd sent none */
	char *label; /* NULL when brokerd reported none */
};

_public_ brokerd_credentials *brokerd_credentials_free(brokerd_credentials *creds)
{
	if (!creds)
		return NULL;
	if (creds->pidfd >= 0)
		close(creds->pidfd);
	free(creds->groups);
	free(creds->label);
	free(creds);
	return NULL;
}

static void brokerd_credentials_freep(brokerd_credentials **p)
{
	brokerd_credentials_free(*p);
}

/* Decodes a GET_CREDENTIALS reply ("uuuuaus", pidfd if the mask says so). */
static int credentials_decode(struct ctrl_reply *r, brokerd_credentials *c)
{
	struct ctrl_reader rd;
	uint32_t pid = 0, uid = 0, gid = 0, n = 0;
	const char *label = NULL;

	ctrl_reader_init(&rd, &r->msg);
	if (ctrl_read_u32(&rd, &c->mask) < 0 || ctrl_read_u32(&rd, &pid) < 0 ||
	    ctrl_read_u32(&rd, &uid) < 0 || ctrl_read_u32(&rd, &gid) < 0 || ctrl_read_array(&rd, &n) < 0)
		return -EPROTO;
	c->pid = (pid_t)pid;
	c->uid = (uid_t)uid;
	c->gid = (gid_t)gid;
	if (n) {
		c->groups = calloc(n, sizeof(*c->groups));
		if (!c->groups)
			return -ENOMEM;
	}
	for (; c->n_groups < n; c->n_groups++) {
		uint32_t g;

		if (ctrl_read_u32(&rd, &g) < 0)
			return -EPROTO;
		c->groups[c->n_groups] = (gid_t)g;
	}
	if (ctrl_read_string(&rd, &label, NULL) < 0)
		return -EPROTO;
	/* "fields not in the mask are 0/empty": an empty label is none */
	if ((c->mask & CTRL_CREDS_LABEL) && label[0] && !(c->label = strdup(label)))
		return -ENOMEM;
	if (!c->label)
		c->mask &= ~CTRL_CREDS_LABEL;
	/* an fd the mask does not announce is closed with the reply */
	if (c->mask & CTRL_CREDS_PIDFD)
		c->pidfd = ctrl_reply_take_fd(r, 0);
	if (c->pidfd < 0)
		c->mask &= ~CTRL_CREDS_PIDFD;
	return 0;
}

static int credentials_query(brokerd_bus *bus, const char *name, brokerd_credentials **ret)
{
	_cleanup_(brokerd_credentials_freep) brokerd_credentials *c = NULL;
	_cleanup_ctrl_reply_ struct ctrl_reply r = { 0 };
	int k;

	if (!bus->connected)
		return -ENOTCONN;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->pidfd = -1;
	k = bus_ctrl_request(bus, CTRL_OP_GET_CREDENTIALS, name, 0, &r);
	if (k < 0)
		return k;
	k = credentials_decode(&r, c);
	if (k < 0)
		return k;
	*ret = TAKE_PTR(c);
	return 0;
}

static bool peer_name_is_valid(const char *name)
{
	return name && (ctrl_name_is_valid_wellknown(name) || ctrl_name_is_valid_unique(name));
}

_public_ int brokerd_bus_get_credentials(brokerd_bus *bus, const char *name, brokerd_credentials **ret)
{
	if (!bus || bus->closed || !peer_name_is_valid(name) || !ret)
		return -EINVAL;
	return credentials_query(bus, name, ret);
}

/* What every getter checks first: 0, or -EINVAL, or -ENODATA when brokerd
 * did not report the field. */
static int credentials_field(brokerd_credentials *creds, const void *ret, uint32_t field)
{
	if (!creds || !ret)
		return -EINVAL;
	return (creds->mask & field) ? 0 : -ENODATA;
}

_public_ int brokerd_credentials_get_pid(brokerd_credentials *creds, pid_t *ret)
{
	int k = credentials_field(creds, ret, CTRL_CREDS_PID);

	if (k >= 0)
		*ret = creds->pid;
	return k;
}

_public_ int brokerd_credentials_get_uid(brokerd_credentials *creds, uid_t *ret)
{
	int k = credentials_field(creds, ret, CTRL_CREDS_UID);

	if (k >= 0)
		*ret = creds->uid;
	return k;
}

_public_ int brokerd_credentials_get_gid(brokerd_credentials *creds, gid_t *ret)
{
	int k = credentials_field(creds, ret, CTRL_CREDS_GID);

	if (k >= 0)
		*ret = creds->gid;
	return k;
}

_public_ int brokerd_credentials_get_groups(brokerd_credentials *creds, const gid_t **ret)
{
	int k = credentials_field(creds, ret, CTRL_CREDS_GIDS);

	if (k < 0)
		return k;
	*ret = creds->groups;
	return creds->n_groups > INT32_MAX ? INT32_MAX : (int)creds->n_groups;
}

_public_ int brokerd_credentials_get_pidfd(brokerd_credentials *creds)
{
	int k = credentials_field(creds, creds, CTRL_CREDS_PIDFD);

	return k < 0 ? k : creds->pidfd;
}

_public_ int brokerd_credentials_get_label(brokerd_credentials *creds, const char **ret)
{
	int k = credentials_field(creds, ret, CTRL_CREDS_LABEL);

	if (k >= 0)
		*ret = creds->label;
	return k;
}

_public_ int brokerd_bus_get_creds(brokerd_bus *bus, const char *name, struct brokerd_creds *ret)
{
	_cleanup_(brokerd_credentials_freep) brokerd_credentials *c = NULL;
	int k;

	if (!bus || bus->closed || !peer_name_is_valid(name) || !ret)
		return -EINVAL;
	k = credentials_query(bus, name, &c);
	if (k < 0)
		return k;
	memset(ret, 0, sizeof(*ret));
	ret->pid = (c->mask & CTRL_CREDS_PID) ? c->pid : 0;
	ret->uid = (c->mask & CTRL_CREDS_UID) ? c->uid : (uid_t)-1;
	ret->gid = (c->mask & CTRL_CREDS_GID) ? c->gid : (gid_t)-1;
	if (name[0] == ':') {
		ctrl_unique_name_parse(name, &ret->id);
	} else {
		char owner[CTRL_UNIQUE_NAME_MAX];

		if (brokerd_bus_get_name_owner(bus, name, owner, sizeof(owner)) >= 0)
			ctrl_unique_name_parse(owner, &ret->id);
	}
	return 0;
}
