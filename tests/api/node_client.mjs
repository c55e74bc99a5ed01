// A non-Python service using the HTTP intake with Node's built-in fetch (Node >= 20, no npm packages).
// Env: API_URL, TENANT_KEY, OTHER_TENANT_KEY, ACCOUNT_ID. Prints one JSON summary; exits 1 on any surprise.
const { API_URL, TENANT_KEY, OTHER_TENANT_KEY, ACCOUNT_ID } = process.env;

function fail(message, detail) {
  console.error(JSON.stringify({ error: message, detail }));
  process.exit(1);
}

async function call(method, path, key, body, headers = {}) {
  const response = await fetch(`${API_URL}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, type: response.headers.get("content-type"), doc: await response.json() };
}

const change = {
  operation: "upsert",
  accounts: [ACCOUNT_ID],
  event: { title: "Booked from Node", start: "2026-12-03T15:00:00", end: "2026-12-03T16:00:00", time_zone: "Europe/Berlin" },
};
const submitted = await call("POST", "/v1/changes", TENANT_KEY, change, { "Idempotency-Key": "node-1" });
if (submitted.status !== 202) fail("submit was not accepted", submitted);
const entityId = submitted.doc.entity_id;

let event;
const deadline = Date.now() + 30_000;
for (;;) {
  event = await call("GET", `/v1/events/${entityId}`, TENANT_KEY);
  if (event.status !== 200) fail("reading the event failed", event);
  if (event.doc.targets.length > 0 && event.doc.targets.every((t) => t.status === "synced")) break;
  if (Date.now() > deadline) fail("the event did not sync in time", event);
  await new Promise((resolve) => setTimeout(resolve, 100));
}

const foreign = await call("GET", `/v1/events/${entityId}`, OTHER_TENANT_KEY);
// The job of the receipt by its id, and the target found by a search of the synced ones, page by page.
const job = await call("GET", `/v1/jobs/${submitted.doc.job_ids[0]}`, TENANT_KEY);
const found = [];
let cursor = null;
do {
  const query = new URLSearchParams({ state: "synced", entity_id: entityId, limit: "1", ...(cursor ? { cursor } : {}) });
  const page = await call("GET", `/v1/events?${query}`, TENANT_KEY);
  if (page.status !== 200) fail("the search failed", page);
  found.push(...page.doc.items.map((t) => [t.account_id, t.state, t.job_id === submitted.doc.job_ids[0]]));
  cursor = page.doc.next_cursor;
} while (cursor);
console.log(JSON.stringify({
  job: [job.status, job.doc.state, job.doc.account_id],
  found,
  entity_id: entityId,
  version: event.doc.version,
  targets: event.doc.targets.map((t) => [t.account_id, t.status, t.synced_version]),
  other_tenant: { status: foreign.status, type: foreign.type, problem: foreign.doc.type },
}));
