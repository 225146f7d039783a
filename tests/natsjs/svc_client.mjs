// nats.js's services client discovers a service and calls its endpoints, as
// tests/integration/test_micro_natsjs.py has it do with a jsclient service.
//
//   node svc_client.mjs LIB URL NAME SUBJECT=DATA...
//
// LIB: "services" is nats.js v3 (`new Svcm(nc).client()` of @nats-io/services
// on an @nats-io/transport-node connection), "nats" is v2 (`nc.services.client()`
// of the npm nats package).
//
// Requests each SUBJECT with DATA (utf-8) in order, then asks the services
// client for ping (all services, then NAME), info and stats (NAME and the id
// NAME's ping gave), so stats counts the calls. Prints one JSON line:
// {"ping_all": [...], "ping": [...], "info": [...], "stats": [...] (what the
// client's iterators yielded), "calls": [{"subject", "data", "error_header",
// "code_header", "service_error": {code, message} or null (nats.js's
// ServiceError.toServiceError of the reply), "is_service_error"}]}.

import { argv } from "node:process";

const [lib, url, name, ...calls] = argv.slice(2);
// The first discovery reply may take up to maxWait on a loaded machine; after
// it, the client waits 1 s for more ("stall" in v3, "jitterTimer" in v2).
let nc, client, ServiceError, ServiceErrorHeader, ServiceErrorCodeHeader;
if (lib === "services") {
  const { connect } = await import("@nats-io/transport-node");
  const svcs = await import("@nats-io/services");
  ({ ServiceError, ServiceErrorHeader, ServiceErrorCodeHeader } = svcs);
  nc = await connect({ servers: url, timeout: 10_000 });
  client = new svcs.Svcm(nc).client({ strategy: "stall", maxWait: 10_000, stall: 1_000 });
} else if (lib === "nats") {
  const nats = await import("nats");
  ({ ServiceError, ServiceErrorHeader, ServiceErrorCodeHeader } = nats);
  nc = await nats.connect({ servers: url, timeout: 10_000 });
  client = nc.services.client({ strategy: "jitterTimer", maxWait: 10_000, jitter: 1_000 });
} else {
  throw new Error(`unknown LIB ${lib}: expected services or nats`);
}

async function collect(iter) {
  const out = [];
  for await (const item of iter) {
    out.push(item);
  }
  return out;
}

try {
  const results = [];
  for (const call of calls) {
    const at = call.indexOf("=");
    const subject = call.slice(0, at);
    const data = new TextEncoder().encode(call.slice(at + 1));
    const m = await nc.request(subject, data, { timeout: 10_000 });
    const se = ServiceError.toServiceError(m);
    results.push({
      subject,
      data: m.string(),
      error_header: m.headers?.get(ServiceErrorHeader) ?? null,
      code_header: m.headers?.get(ServiceErrorCodeHeader) ?? null,
      service_error: se === null ? null : { code: se.code, message: se.message },
      is_service_error: ServiceError.isServiceError(m),
    });
  }
  const pingAll = await collect(await client.ping());
  const ping = await collect(await client.ping(name));
  const id = ping.length > 0 ? ping[0].id : "";
  const info = await collect(await client.info(name, id));
  const stats = await collect(await client.stats(name, id));
  console.log(JSON.stringify({ ping_all: pingAll, ping, info, stats, calls: results }));
} finally {
  await nc.close();
}
