// A Worker that imports the package by name and decodes the grant it is sent.
import { decodeAcquireResponse, version } from "paceline";

export default {
  async fetch(request) {
    if (request.method === "GET") return Response.json({ version: version() });
    try {
      return Response.json({ grant: decodeAcquireResponse(await request.text()) });
    } catch (error) {
      return Response.json(
        { error: { code: error.code, message: error.message, isError: error instanceof Error } },
        { status: 400 },
      );
    }
  },
};
