// node:https for the function bundles, taken as CommonJS: see http.cjs beside this file.
module.exports = process.getBuiltinModule('node:https');
