/* SPDX-License-Identifier: MIT */
/*
 * message.c - encoder and decoder of channel messages (see message.h).
 * chmsg_decode() is what every receiver runs on bytes from another process.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "protocol/ctrl.h"
#include "protocol/message.h"
#include "util/macro.h"

/* What each type requires of its fields. */
static const struct chmsg_type_info {
	const char *name;
	bool member_required;
	bool member_is_error;
	bool reply_serial_required;
} types[] = {
	[CHMSG_CALL] = { .name = "call", .member_required = true },
	[CHMSG_REPLY] = { .name = "reply", .reply_serial_required = true },
	[CHMSG_ERROR] = { .name = "error",
			  .member_required = true,
			  .member_is_error = true,
			  .reply_serial_required = true },
	[CHMSG_SIGNAL] = { .name = "signal", .member_required = true },
};
_Static_assert(ELEMENTSOF(types) == _CHMSG_TYPE_MAX, "every channel message type needs an entry");

const char *chmsg_type_to_string(unsigned int type)
{
	if (type == 0 || type >= ELEMENTSOF(types))
		return NULL;
	return types[type].name;
}

static int chmsg_check(const struct chmsg *m, size_t member_len, size_t dest_len)
{
	const struct chmsg_type_info *t;

	if (!chmsg_type_to_string(m->type))
		return -EINVAL;
	t = &types[m->type];
	if (m->flags & ~CHMSG_F_ALL)
		return -EINVAL;
	if (m->serial == 0)
		return -EINVAL;
	if (t->reply_serial_required != (m->reply_serial != 0))
		return -EINVAL;
	if (member_len > CTRL_NAME_MAX || dest_len > CTRL_NAME_MAX)
		return -EINVAL;
	if (t->member_required) {
		if (t->member_is_error ? !ctrl_name_is_valid_error(m->member) :
					 !ctrl_name_is_valid_member(m->member))
			return -EINVAL;
	} else if (member_len != 0) {
		return -EINVAL;
	}
	if (dest_len != 0 && !ctrl_name_is_valid_unique(m->destination))
		return -EINVAL;
	return 0;
}

int chmsg_encode(const struct chmsg *m, void *buf, size_t size)
{
	size_t ml, dl, total;
	uint8_t *p = buf;
	uint16_t v16;
	uint32_t v32;

	if (!m || (!buf && size) || (!m->body && m->body_len))
		return -EINVAL;
	ml = m->member ? strlen(m->member) : 0;
	dl = m->destination ? strlen(m->destination) : 0;
	if (chmsg_check(m, ml, dl) < 0)
		return -EINVAL;
	total = CHMSG_HEADER_SIZE + ml + 1 + dl + 1 + (size_t)m->body_len;
	if (total > CHMSG_MAX || total > size)
		return -EMSGSIZE;

	memset(p, 0, CHMSG_HEADER_SIZE);
	p[0] = CHMSG_VERSION;
	p[1] = m->type;
	v16 = htole16(m->flags);
	memcpy(p + 2, &v16, 2);
	v32 = htole32(m->serial);
	memcpy(p + 4, &v32, 4);
	v32 = htole32(m->reply_serial);
	memcpy(p + 8, &v32, 4);
	v16 = htole16((uint16_t)ml);
	memcpy(p + 12, &v16, 2);
	v16 = htole16((uint16_t)dl);
	memcpy(p + 14, &v16, 2);
	v32 = htole32(m->body_len);
	memcpy(p + 16, &v32, 4);
	/* p + 20: reserved, zero */
	p += CHMSG_HEADER_SIZE;
	if (ml)
		memcpy(p, m->member, ml);
	p[ml] = 0;
	p += ml + 1;
	if (dl)
		memcpy(p, m->destination, dl);
	p[dl] = 0;
	p += dl + 1;
	if (m->body_len)
		memcpy(p, m->body, m->body_len);
	return (int)total;
}

int chmsg_decode(struct chmsg *m, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint16_t ml, dl, v16;
	uint32_t bl, v32, reserved;

	if (!m || (!buf && len))
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	if (len < CHMSG_HEADER_SIZE || len > CHMSG_MAX)
		return -EBADMSG;
	if (p[0] != CHMSG_VERSION)
		return -EPROTO;
	m->type = p[1];
	memcpy(&v16, p + 2, 2);
	m->flags = le16toh(v16);
	memcpy(&v32, p + 4, 4);
	m->serial = le32toh(v32);
	memcpy(&v32, p + 8, 4);
	m->reply_serial = le32toh(v32);
	memcpy(&v16, p + 12, 2);
	ml = le16toh(v16);
	memcpy(&v16, p + 14, 2);
	dl = le16toh(v16);
	memcpy(&v32, p + 16, 4);
	bl = le32toh(v32);
	memcpy(&reserved, p + 20, 4);
	if (reserved != 0)
		return -EBADMSG;
	/* All sizes are small (u16, u16, < CHMSG_MAX), so the sum cannot wrap. */
	if (bl > CHMSG_MAX || (size_t)CHMSG_HEADER_SIZE + ml + 1 + dl + 1 + bl != len)
		return -EBADMSG;
	p += CHMSG_HEADER_SIZE;
	if (p[ml] != 0 || memchr(p, 0, ml))
		return -EBADMSG;
	m->member = (const char *)p;
	p += ml + 1;
	if (p[dl] != 0 || memchr(p, 0, dl))
		return -EBADMSG;
	m->destination = (const char *)p;
	p += dl + 1;
	m->body = p;
	m->body_len = bl;
	if (chmsg_check(m, ml, dl) < 0)
		return -EBADMSG;
	return 0;
}
