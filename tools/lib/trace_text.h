/*
 * A packet trace as text (docs/trace.md), written from its JSON form:
 * the object dpflow_ctl_trace_json() makes, which `dpflow trace` builds
 * from its own trace and the control socket's `trace` request replies
 * with. dpflow and dpflowctl both compile this file in, so the two print
 * a trace alike. Any thread; it only reads @trace.
 */
#ifndef DPFLOW_TOOLS_TRACE_TEXT_H
#define DPFLOW_TOOLS_TRACE_TEXT_H

#include <jansson.h>
#include <stdio.h>

/*
 * Print @trace's steps to @f, a line each ("  pipe 'fw' (acl): hit entry
 * 1, actions -> pipe 'nat'"), then its verdict ("verdict: port 'out'").
 * The caller prints what comes before (the packet) and after (frames).
 */
void trace_text(FILE *f, json_t *trace);

#endif /* DPFLOW_TOOLS_TRACE_TEXT_H */
