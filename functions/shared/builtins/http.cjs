// node:http for the function bundles, taken as CommonJS (lib/infra/service-function.ts, BUNDLE_SETTINGS.alias).
// An ESM import of node:http makes Node 22 build its ESM facade, which reads every export, and its
// WebSocket-related exports load undici: 11 ms of every cold start. This reads nothing until used.
module.exports = process.getBuiltinModule('node:http');
