import type { GatewayCore, GatewayCoreOptions } from "../../pkg/paceline.js";

export interface DevGatewayOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** With a secret, every rate call needs a token from `mintRateScopeToken`. */
  secret?: string;
  /** The rest of the core's options (horizonMs, leaseTtlMs, windowGuardMs, ...). */
  options?: Omit<GatewayCoreOptions, "secret">;
}

export interface DevGateway {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  url: string;
  /** The core the server answers with, for inspection in tests. */
  core: GatewayCore;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/** Starts the gateway on 127.0.0.1 in this process. */
export function startDevGateway(options?: DevGatewayOptions): Promise<DevGateway>;
