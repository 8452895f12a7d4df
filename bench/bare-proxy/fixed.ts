/**
 * The floor of a buffered function (as the account function is): it answers a fixed JSON body,
 * nothing else. What remains is the runtime client's own work per invocation.
 */
const BODY = JSON.stringify({
  object: 'list',
  data: [{ id: 'svc-fast', object: 'model', created: 0, owned_by: 'svc' }],
});

export const handler = async () => ({
  statusCode: 200,
  headers: { 'content-type': 'application/json' },
  body: BODY,
});
