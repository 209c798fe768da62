// rtvox API reference at /docs: renders this server's own openapi.json with plain DOM calls, so it works offline
// (FastAPI's Swagger UI and ReDoc fetch theirs from the internet). Every string from the schema goes in as text, never
// as HTML. window.rtvoxDocs exposes the state for the browser test.
"use strict";

const $ = (id) => document.getElementById(id);
const METHODS = ["get", "post", "put", "patch", "delete", "head", "options", "trace"];
const LIMITS = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
                "minItems", "maxItems", "multipleOf"];
const MAX_DEPTH = 6;  // nesting shown for object fields; deeper ones are named by their type, not expanded
const state = { status: "loading", operations: 0, shown: 0, error: null };
window.rtvoxDocs = state;

// An element with a class and children; strings become text nodes (Node.append never parses HTML).
function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  node.append(...children.filter((c) => c !== null && c !== undefined && c !== ""));
  return node;
}

// ------------------------------------------------------------------ schemas
// What a local "$ref" ("#/components/schemas/X") points at; {} for one this page cannot follow.
function lookup(spec, ref) {
  if (!ref.startsWith("#/")) return {};
  let node = spec;
  for (const key of ref.slice(2).split("/")) {
    node = node && typeof node === "object" ? node[key.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
  }
  return node && typeof node === "object" ? node : {};
}

function deref(spec, schema) {
  for (let hops = 0; schema && schema.$ref && hops < 20; hops++) schema = lookup(spec, schema.$ref);
  return schema || {};
}

// A short type: "string", "VoiceRef", "string | null" (OpenAPI 3.1's optional), "ValidationError[]", "file".
function typeLabel(s) {
  if (!s || typeof s !== "object") return "any";
  if (s.$ref) return s.$ref.split("/").pop();
  for (const key of ["anyOf", "oneOf"]) if (Array.isArray(s[key])) return s[key].map(typeLabel).join(" | ");
  if (Array.isArray(s.allOf)) return s.allOf.map(typeLabel).join(" & ");
  if ("const" in s) return JSON.stringify(s.const);
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (!types.length) return s.properties ? "object" : "any";
  return types.map((t) => {
    if (t === "array") {
      const inner = typeLabel(s.items);
      return inner.includes(" ") ? `(${inner})[]` : `${inner}[]`;
    }
    if (t === "object" && s.additionalProperties && typeof s.additionalProperties === "object") {
      return `map of ${typeLabel(s.additionalProperties)}`;
    }
    if (t === "string" && (s.format === "binary" || s.contentMediaType)) return "file";
    return s.format ? `${t} (${s.format})` : t;
  }).join(" | ");
}

// Limits and allowed values, from the schema and from the branches of a union (where 3.1's optionals keep them).
function constraints(s) {
  const parts = [];
  for (const branch of [s, ...(s.anyOf || []), ...(s.oneOf || [])]) {
    if (!branch || branch.$ref) continue;
    if (Array.isArray(branch.enum)) parts.push("one of: " + branch.enum.map(String).join(", "));
    for (const key of LIMITS) if (key in branch) parts.push(`${key} ${branch[key]}`);
  }
  if ("default" in s) parts.push("default " + JSON.stringify(s.default));
  return parts;
}

// One field: name, type, required, limits, description, then the fields of an object value nested below.
function fieldItem(spec, name, schema, required, seen, depth, where) {
  const item = el("li", null, el("div", "field",
    el("code", "name", name),
    el("span", "type", typeLabel(schema)),
    required ? el("span", "required", "required") : null,
    where ? el("span", "constraint", where) : null,
    ...constraints(schema).map((c) => el("span", "constraint", c)),
  ));
  item.dataset.field = name;
  const description = schema.description || (schema.$ref ? deref(spec, schema).description : "");
  if (description) item.append(el("div", "desc muted", description));
  const nested = fieldList(spec, schema, seen, depth);
  if (nested) item.append(nested);
  return item;
}

// The fields of an object schema, reached through $refs, array items, maps and unions; null if it has none.
// `seen` holds the $refs followed on the way here, so a recursive schema stops at its name.
function fieldList(spec, schema, seen, depth) {
  if (!schema || typeof schema !== "object" || depth > MAX_DEPTH) return null;
  if (schema.$ref) {
    if (seen.includes(schema.$ref)) return null;
    return fieldList(spec, lookup(spec, schema.$ref), [...seen, schema.$ref], depth);
  }
  const list = el("ul", "fields");
  const required = new Set(schema.required || []);
  for (const [name, prop] of Object.entries(schema.properties || {})) {
    list.append(fieldItem(spec, name, prop, required.has(name), seen, depth + 1));
  }
  const branches = [...(schema.anyOf || []), ...(schema.oneOf || []), ...(schema.allOf || [])];
  if (schema.items) branches.push(schema.items);
  if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
    branches.push(schema.additionalProperties);
  }
  const subs = branches.map((b) => [b, fieldList(spec, b, seen, depth)]).filter(([, sub]) => sub);
  if (!list.childElementCount && subs.length === 1) return subs[0][1];
  for (const [branch, sub] of subs) list.append(el("li", null, el("span", "muted", `as ${typeLabel(branch)}:`), sub));
  return list.childElementCount ? list : null;
}

// ------------------------------------------------------------------ operations
function parameters(spec, params) {
  const list = el("ul", "fields");
  for (const raw of params) {
    const p = deref(spec, raw);
    const schema = { ...(p.schema || {}), description: p.description || (p.schema || {}).description };
    list.append(fieldItem(spec, p.name, schema, Boolean(p.required), [], 1, `in ${p.in}`));
  }
  return list;
}

function requestBody(spec, raw) {
  const body = deref(spec, raw);
  const section = el("section", null, el("h3", null, body.required ? "Request body (required)" : "Request body"));
  if (body.description) section.append(el("p", "desc", body.description));
  for (const [type, media] of Object.entries(body.content || {})) {
    const schema = media.schema || {};
    section.append(el("div", "field", el("code", null, type), el("span", "type", typeLabel(schema)),
                      ...constraints(deref(spec, schema)).map((c) => el("span", "constraint", c))));
    const fields = fieldList(spec, schema, [], 0);
    if (fields) section.append(fields);
  }
  return section;
}

function responses(spec, all) {
  const list = el("ul", "fields");
  for (const status of Object.keys(all || {}).sort()) {
    const r = deref(spec, all[status]);
    const types = Object.entries(r.content || {})
      .map(([type, media]) => (media.schema ? `${type}: ${typeLabel(media.schema)}` : type));
    list.append(el("li", "field", el("code", "status", status), el("span", null, r.description || ""),
                   types.length ? el("span", "constraint", types.join(", ")) : null));
  }
  return list;
}

function operation(spec, path, method, op, pathParams) {
  const node = el("details", "op panel", el("summary", null,
    el("span", `method ${method}`, method.toUpperCase()), el("span", "path", path), el("span", "summary", op.summary || "")));
  node.open = true;
  node.dataset.method = method;
  node.dataset.path = path;
  node.dataset.search = [method, path, op.summary, op.description, op.operationId, ...(op.tags || [])]
    .filter(Boolean).join(" ").toLowerCase();
  const body = el("div", "body");
  if (op.deprecated) body.append(el("p", "required", "deprecated"));
  if (op.description) body.append(el("p", "desc", op.description));
  // Operation parameters override the path's of the same name and place.
  const own = new Set((op.parameters || []).map((p) => `${p.in}:${p.name}`));
  const params = [...pathParams.filter((p) => !own.has(`${p.in}:${p.name}`)), ...(op.parameters || [])];
  if (params.length) body.append(el("h3", null, "Parameters"), parameters(spec, params));
  if (op.requestBody) body.append(requestBody(spec, op.requestBody));
  body.append(el("h3", null, "Responses"), responses(spec, op.responses));
  node.append(body);
  return node;
}

function render(spec) {
  const info = spec.info || {};
  $("title").textContent = `${info.title || "API"} ${info.version || ""} API`.replace(/\s+/g, " ");
  $("info").textContent = info.summary || info.description || "";
  // Tags the schema declares come first, in its order; operations without a tag go last.
  const groups = new Map((spec.tags || []).map((t) => [t.name, { description: t.description, ops: [] }]));
  for (const [path, item] of Object.entries(spec.paths || {})) {
    for (const method of METHODS) {
      if (!item[method]) continue;
      const tag = (item[method].tags || [])[0] || "";
      if (!groups.has(tag)) groups.set(tag, { description: "", ops: [] });
      groups.get(tag).ops.push(operation(spec, path, method, item[method], item.parameters || []));
      state.operations++;
    }
  }
  const untagged = groups.get("");
  if (untagged) {
    groups.delete("");
    groups.set("", untagged);
  }
  const named = [...groups.keys()].some(Boolean);
  for (const [tag, group] of groups) {
    if (!group.ops.length) continue;
    const section = el("section", "tag", named ? el("h2", null, tag || "other") : null);
    if (group.description) section.append(el("p", "desc muted", group.description));
    section.append(...group.ops);
    $("operations").append(section);
  }
}

// ------------------------------------------------------------------ filter and loading
// Every word typed must appear in an operation's method, path, summary, description, id or tag.
function applyFilter() {
  if (state.status !== "ready") return;  // typed before the schema came: applied once it has
  const words = $("filter").value.toLowerCase().split(/\s+/).filter(Boolean);
  state.shown = 0;
  for (const section of document.querySelectorAll("section.tag")) {
    let any = false;
    for (const op of section.querySelectorAll("details.op")) {
      op.hidden = !words.every((w) => op.dataset.search.includes(w));
      any = any || !op.hidden;
      if (!op.hidden) state.shown++;
    }
    section.hidden = !any;
  }
  $("status").textContent = words.length
    ? `${state.shown} of ${state.operations} operations match`
    : `${state.operations} operations`;
}

async function load() {
  // Relative to this page, so it is found under a proxy's path prefix too.
  const url = new URL("openapi.json", location.href);
  try {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`the server answered ${response.status} ${response.statusText}`.trim());
    render(await response.json());
  } catch (err) {
    state.status = "error";
    state.error = String((err && err.message) || err);
    const status = $("status");
    status.className = "error";
    status.setAttribute("role", "alert");
    status.textContent = `Could not load the API schema from ${url.pathname}: ${state.error}. ` +
      "Check that the rtvox server is running and reload the page.";
    return;
  }
  state.status = "ready";
  applyFilter();
}

$("filter").addEventListener("input", applyFilter);
load();
