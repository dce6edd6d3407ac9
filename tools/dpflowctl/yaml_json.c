/*
 * YAML (and so JSON, its flow subset) to jansson, for entries given on the
 * command line or in a file. A plain (unquoted) YAML null (null, Null,
 * NULL, ~ or nothing) becomes JSON null, every other scalar a JSON string:
 * the server reads entries with the config loader, where a scalar is text
 * either way (so true and 80 read as they would in a config) but a null
 * must stay a null ("values: [null, ...]" for a constant action), and a
 * quoted "null" must stay text.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "dpflowctl.h"

#define DEPTH_MAX 64

/* A plain scalar YAML reads as null (the loader's y_is_null()). */
static bool is_null(const yaml_node_t *n)
{
	const char *s = (const char *)n->data.scalar.value;

	return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       (!*s || !strcmp(s, "~") || !strcmp(s, "null") ||
		!strcmp(s, "Null") || !strcmp(s, "NULL"));
}

static json_t *node_json(yaml_document_t *doc, yaml_node_t *n, unsigned depth,
			 char *why, size_t why_len)
{
	json_t *out;

	if (!n || depth > DEPTH_MAX) {
		snprintf(why, why_len, "nested too deeply");
		return NULL;
	}
	switch (n->type) {
	case YAML_SCALAR_NODE:
		if (is_null(n))
			return json_null();
		return json_stringn((const char *)n->data.scalar.value,
				    n->data.scalar.length);
	case YAML_SEQUENCE_NODE:
		out = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     out && i < n->data.sequence.items.top; i++) {
			json_t *v =
			    node_json(doc, yaml_document_get_node(doc, *i),
				      depth + 1, why, why_len);

			if (!v || json_array_append_new(out, v)) {
				json_decref(out);
				return NULL;
			}
		}
		return out;
	case YAML_MAPPING_NODE:
		out = json_object();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     out && p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			json_t *v;

			if (!k || k->type != YAML_SCALAR_NODE) {
				snprintf(why, why_len,
					 "line %lu: keys must be plain text",
					 k ? (unsigned long)k->start_mark.line +
						 1
					   : 0ul);
				json_decref(out);
				return NULL;
			}
			v = node_json(doc,
				      yaml_document_get_node(doc, p->value),
				      depth + 1, why, why_len);
			if (!v ||
			    json_object_set_new(
				out, (const char *)k->data.scalar.value, v)) {
				json_decref(out);
				return NULL;
			}
		}
		return out;
	default:
		snprintf(why, why_len, "empty document");
		return NULL;
	}
}

json_t *yaml_to_json(const char *text, size_t len, const char *name, char *why,
		     size_t why_len)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	json_t *out;

	yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(why, why_len, "%s:%lu: %s", name,
			 (unsigned long)parser.problem_mark.line + 1,
			 parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		return NULL;
	}
	yaml_parser_delete(&parser);
	if (!yaml_document_get_root_node(&doc)) {
		snprintf(why, why_len, "%s: empty", name);
		yaml_document_delete(&doc);
		return NULL;
	}
	why[0] = '\0';
	out =
	    node_json(&doc, yaml_document_get_root_node(&doc), 0, why, why_len);
	if (!out && !why[0])
		snprintf(why, why_len, "%s: out of memory", name);
	yaml_document_delete(&doc);
	return out;
}
