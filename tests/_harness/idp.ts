/**
 * A real OIDC IdP for tests: a `Deno.serve` HTTP server on 127.0.0.1 with a discovery document
 * and a JWKS, and a `sign()` that mints jose-signed tokens with its private key. `RS256` is
 * shaped like Keycloak (realm issuer URL, `/protocol/openid-connect/certs`, an extra RSA-OAEP
 * encryption key in the JWKS, `azp`, `typ: "Bearer"`, `realm_access`, `preferred_username`);
 * `ES256` and `EdDSA` are plain minimal IdPs.
 */
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import type { JsonWebKeySet, PublicJwk } from "../../lib/auth/jwks.ts";

/** The algorithms a test IdP can sign with. */
export type TestIdpAlg = "RS256" | "ES256" | "EdDSA";

/** Options for {@linkcode startTestIdp}. */
export interface TestIdpOptions {
  alg: TestIdpAlg;
  /** Override the issuer string (given the server origin); default realm URL or the origin. */
  issuer?: string | ((origin: string) => string);
  /** Audience put in tokens by default (default "cotal"). */
  audience?: string;
  /** Client id put in `azp` (default "cotal-cli"). */
  clientId?: string;
  /** Pad the JWKS response with this many bytes of whitespace (size-cap tests). */
  jwksPadBytes?: number;
  /** Never answer JWKS requests until close (timeout tests). */
  hangJwks?: boolean;
}

/** Options for one {@linkcode TestIdp.sign} call. */
export interface TestIdpSignOptions {
  /** Extra or overriding protected-header members (e.g. `jwk`, `jku`, `crit`). */
  header?: Record<string, unknown>;
  /** Sign with a fresh key the JWKS does not list (its own kid). */
  strangerKey?: boolean;
}

/** A running test IdP. */
export interface TestIdp {
  readonly alg: TestIdpAlg;
  readonly origin: string;
  readonly issuer: string;
  readonly audience: string;
  readonly clientId: string;
  /** The `sub` every token carries unless a test overrides it. */
  readonly sub: string;
  readonly discoveryUrl: string;
  readonly jwksUrl: string;
  /** The kid of the current signing key. */
  readonly kid: string;
  /** How many JWKS requests the server has answered. */
  readonly jwksRequests: number;
  /** Default claims for `sub` and friends; `claims` overrides, an `undefined` value omits. */
  sign(claims?: Record<string, unknown>, opts?: TestIdpSignOptions): Promise<string>;
  /** Replace the signing key (the old one leaves the JWKS unless `keepOld`); returns the kid. */
  rotate(opts?: { keepOld?: boolean }): Promise<string>;
  /** The JWKS the server publishes right now. */
  jwks(): JsonWebKeySet;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

/** Start a test IdP on a free loopback port. */
export async function startTestIdp(opts: TestIdpOptions): Promise<TestIdp> {
  const alg = opts.alg;
  const keycloak = alg === "RS256";
  const audience = opts.audience ?? "cotal";
  const clientId = opts.clientId ?? "cotal-cli";
  let current = await newSigningKey(alg);
  let published: SigningKey[] = [current];
  const encKey = keycloak ? await newEncryptionKey() : undefined;
  let jwksRequests = 0;
  let release!: () => void;
  const closing = new Promise<void>((r) => (release = r));

  let issuer = "";
  let origin = "";
  let jwksPath = "";
  let discoveryPath = "";
  const publicJwks = (): JsonWebKeySet => ({
    keys: [...published.map((k) => k.publicJwk), ...(encKey ? [encKey] : [])] as PublicJwk[],
  });

  const server: Deno.HttpServer<Deno.NetAddr> = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req: Request): Promise<Response> => {
      const path = new URL(req.url).pathname;
      if (req.method !== "GET") return new Response("method not allowed", { status: 405 });
      if (path === discoveryPath) {
        return Response.json({
          issuer,
          jwks_uri: `${origin}${jwksPath}`,
          token_endpoint: `${issuer}/protocol/openid-connect/token`,
          id_token_signing_alg_values_supported: [alg],
          response_types_supported: ["code"],
          subject_types_supported: ["public"],
        });
      }
      if (path === jwksPath) {
        jwksRequests++;
        if (opts.hangJwks) {
          await closing;
          return new Response("closing", { status: 503 });
        }
        const body = JSON.stringify(publicJwks()) + " ".repeat(opts.jwksPadBytes ?? 0);
        return new Response(body, { headers: { "content-type": "application/json" } });
      }
      return new Response("not found", { status: 404 });
    },
  );
  origin = `http://127.0.0.1:${server.addr.port}`;
  if (typeof opts.issuer === "function") issuer = opts.issuer(origin);
  else if (typeof opts.issuer === "string") issuer = opts.issuer;
  else issuer = keycloak ? `${origin}/realms/cotal` : origin;
  const issuerPath = new URL(issuer.startsWith("http") ? issuer : origin).pathname.replace(
    /\/+$/,
    "",
  );
  discoveryPath = `${issuerPath}/.well-known/openid-configuration`;
  jwksPath = keycloak ? `${issuerPath}/protocol/openid-connect/certs` : `${issuerPath}/jwks`;
  const sub = crypto.randomUUID();

  let closed: Promise<void> | undefined;
  const idp: TestIdp = {
    alg,
    origin,
    get issuer() {
      return issuer;
    },
    audience,
    clientId,
    sub,
    discoveryUrl: `${origin}${discoveryPath}`,
    jwksUrl: `${origin}${jwksPath}`,
    get kid() {
      return current.kid;
    },
    get jwksRequests() {
      return jwksRequests;
    },
    async sign(claims = {}, signOpts = {}) {
      const key = signOpts.strangerKey ? await newSigningKey(alg) : current;
      const now = Math.floor(Date.now() / 1000);
      const base: Record<string, unknown> = keycloak
        ? {
          exp: now + 300,
          iat: now,
          jti: crypto.randomUUID(),
          iss: issuer,
          aud: audience,
          sub,
          typ: "Bearer",
          azp: clientId,
          sid: crypto.randomUUID(),
          acr: "1",
          "allowed-origins": ["http://127.0.0.1"],
          realm_access: { roles: ["default-roles-cotal", "offline_access", "uma_authorization"] },
          resource_access: { account: { roles: ["manage-account", "view-profile"] } },
          scope: "openid profile email",
          email_verified: false,
          preferred_username: "alice",
        }
        : { iss: issuer, aud: audience, sub, iat: now, exp: now + 300 };
      const payload = { ...base, ...claims };
      for (const [k, v] of Object.entries(payload)) if (v === undefined) delete payload[k];
      const header = { alg, kid: key.kid, ...(keycloak ? { typ: "JWT" } : {}), ...signOpts.header };
      return await new SignJWT(payload).setProtectedHeader(header as { alg: string }).sign(
        key.privateKey,
      );
    },
    async rotate(rotateOpts = {}) {
      current = await newSigningKey(alg);
      published = rotateOpts.keepOld ? [current, ...published] : [current];
      return current.kid;
    },
    jwks: publicJwks,
    close() {
      closed ??= (async () => {
        release();
        await server.shutdown();
      })();
      return closed;
    },
    [Symbol.asyncDispose]() {
      return idp.close();
    },
  };
  return idp;
}

async function newSigningKey(alg: TestIdpAlg): Promise<SigningKey> {
  const pair = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  const kid = crypto.randomUUID();
  return { kid, privateKey: pair.privateKey, publicJwk: { ...jwk, kid, alg, use: "sig" } };
}

async function newEncryptionKey(): Promise<JWK> {
  // Keycloak publishes an RSA-OAEP key next to its signing key; a verifier must skip it.
  const pair = await generateKeyPair("RSA-OAEP", { extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  return { ...jwk, kid: crypto.randomUUID(), alg: "RSA-OAEP", use: "enc" };
}
