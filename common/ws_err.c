/* ws_err.c - text for the error space of ws_err.h. */
#include "ws_err.h"

#include <errno.h>
#include <string.h>
#include <uv.h>

const char *ws_strerror(int err) {
  switch (err) {
#define WS_ERR_TEXT(name, text)                                                \
  case WS_E##name:                                                             \
    return text;
    WS_ERR_MAP(WS_ERR_TEXT)
#undef WS_ERR_TEXT
  default:
    break;
  }
  if (err < 0 && err > WS_E__FIRST)
    return uv_strerror(err); /* -errno: libuv knows every errno's text */
  return err == 0 ? "success" : "unknown error";
}

const char *ws_errname(int err) {
  switch (err) {
#define WS_ERR_NAME(name, text)                                                \
  case WS_E##name:                                                             \
    return "WS_E" #name;
    WS_ERR_MAP(WS_ERR_NAME)
#undef WS_ERR_NAME
  default:
    break;
  }
  if (err < 0 && err > WS_E__FIRST)
    return uv_err_name(err);
  return err == 0 ? "OK" : "EUNKNOWN";
}

int ws_err_disk(int err) {
  if (err == UV_ENOSPC || err == -EDQUOT)
    return WS_ENOSPC;
  if (err == UV_EIO)
    return WS_EIO;
  return err;
}

int ws_err_is_disk(int err) {
  return err == WS_ENOSPC || err == WS_EIO;
}

void ws_msg_mark_cut(char *buf, size_t cap, int len) {
  if (cap < 4 || len < 0 || (size_t)len < cap)
    return;
  size_t end = cap - 4;
  while (end > 0 && ((unsigned char)buf[end] & 0xC0u) == 0x80u)
    end--; /* a continuation byte: its sequence starts earlier */
  memcpy(buf + end, "...", 4);
}
