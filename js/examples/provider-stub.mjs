// A provider stub that records when every call arrived. GET /times returns
// them; DELETE /times forgets them.
const arrivals = [];

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/times") {
      if (request.method === "DELETE") arrivals.length = 0;
      return Response.json(arrivals);
    }
    arrivals.push(Date.now());
    return Response.json({ row: url.searchParams.get("row"), enriched: true });
  },
};
