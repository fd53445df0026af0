/* ws_log.h - leveled logging to stderr, one line per event.
 *
 * Daemons log an error once, where it takes effect, with the object's identity
 * first ("conn#42 peer=10.0.0.7:1234: ..."). Libraries return errors and do
 * not log. Any thread; each line is written with one write(2).
 */
#ifndef WS_LOG_H
#define WS_LOG_H

typedef enum {
  WS_LOG_ERROR,
  WS_LOG_WARN,
  WS_LOG_INFO,
  WS_LOG_DEBUG,
  WS_LOG_LAST
} ws_log_level_t;

void ws_log_set_level(ws_log_level_t level);
ws_log_level_t ws_log_get_level(void);
/* Parses "error|warn|info|debug"; returns 0 or WS_EUSAGE. */
int ws_log_parse_level(const char *s, ws_log_level_t *out);
void ws_log_set_prog(const char *prog);

void ws_log(ws_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define WS_LOGE(...) ws_log(WS_LOG_ERROR, __VA_ARGS__)
#define WS_LOGW(...) ws_log(WS_LOG_WARN, __VA_ARGS__)
#define WS_LOGI(...) ws_log(WS_LOG_INFO, __VA_ARGS__)
#define WS_LOGD(...)                                                           \
  do {                                                                         \
    if (ws_log_get_level() >= WS_LOG_DEBUG)                                    \
      ws_log(WS_LOG_DEBUG, __VA_ARGS__);                                       \
  } while (0)

#endif
