/* trk_notify.h - the tracker's side of systemd's readiness protocol
 * (sd_notify: one datagram to $NOTIFY_SOCKET), without libsystemd.
 *
 * Loop thread (main.c calls it once the listeners are up and once on
 * SIGTERM); never blocks: the socket is non-blocking and a datagram is
 * sent or dropped.
 */
#ifndef TRK_NOTIFY_H
#define TRK_NOTIFY_H

/* Sends msg ("READY=1", "STOPPING=1", "STATUS=...", newline-separated) to
 * $NOTIFY_SOCKET: a path, or '@' for the abstract namespace. Without the
 * variable (not started by systemd's Type=notify) it does nothing. Returns
 * 1 sent, 0 nothing to do, or a negative errno; a failure is logged as a
 * warning, and the tracker keeps running either way. msg is borrowed. */
int trk_notify(const char *msg);

#endif
