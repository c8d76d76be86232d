// Every JS host of a GatewayCore answers HTTP through the core's own router,
// so the Durable Object, the Node dev server and tests cannot drift apart.

export async function handleGatewayRequest(core, request, nowMs) {
  const url = new URL(request.url);
  const body = await request.text();
  // The clock is read once the body is in: a slow upload must not make the
  // scheduler place permits at a time that has already passed.
  const now = nowMs ?? Date.now();
  const answer = core.handle(request.method, url.pathname + url.search, body, now);
  return new Response(answer.body, {
    status: answer.status,
    headers: { "content-type": "application/json" },
  });
}
