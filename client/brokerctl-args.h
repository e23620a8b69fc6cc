/* SPDX-License-Identifier: MIT */
/*
 * brokerctl-args.h - typed message bodies on brokerctl's command line, as
 * busctl writes them: building a body from a signature and its arguments
 * (call, emit), and printing a body as text or as busctl's JSON.
 */
#ifndef BROKERD_CLIENT_BROKERCTL_ARGS_H
#define BROKERD_CLIENT_BROKERCTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <brokerd/brokerd.h>

/*
 * Appends the values of signature, written as the n strings at args, to m
 * (a message being built): basic types as text (b also as yes/no, on/off,
 * 1/0), an array as a count then its elements, a struct or dict entry as
 * its fields, a variant as the value's signature then the value. All
 * strings must be used. Returns 0, or -EINVAL with what is wrong in err.
 */
int args_append(brokerd_msg *m, const char *signature, int n, char **args, char *err, size_t err_size);

/* The body of a sealed or received message as busctl prints it: the
 * signature, then the values in the syntax args_append() reads, strings
 * quoted; nothing for an empty body. Returns 0 or -errno. */
int body_print(brokerd_msg *m, FILE *f);

/* The body as busctl's JSON: {"type":SIGNATURE,"data":[VALUES]}, on one
 * line or indented (pretty). Returns 0 or -errno. */
int body_print_json(brokerd_msg *m, FILE *f, bool pretty);

/*
 * The variant that comes next in m (a property's value): as busctl's
 * get-property prints it, its signature then its values and a newline, or
 * (with_signature false, for a table) only the values. Returns 0 or -errno
 * (-ENXIO: no variant).
 */
int variant_print(brokerd_msg *m, FILE *f, bool with_signature);

/* The same as busctl's JSON: {"type":SIGNATURE,"data":VALUE}. */
int variant_print_json(brokerd_msg *m, FILE *f, bool pretty);

#endif
