/* trk_dashboard.h - the dashboard page, compiled in from dashboard.html by
 * trk_embed at build time (see tracker/meson.build), and the chart library
 * it loads (vendor/uplot, served by the tracker). Read-only data. */
#ifndef TRK_DASHBOARD_H
#define TRK_DASHBOARD_H

#include <stddef.h>

extern const char trk_dashboard_html[]; /* NUL-terminated */
extern const size_t trk_dashboard_html_len;
extern const char trk_uplot_js[];
extern const size_t trk_uplot_js_len;
extern const char trk_uplot_css[];
extern const size_t trk_uplot_css_len;

#endif
