/**
 * The daemons of one space, as `up`, `space add` and `space restore` start them.
 *
 * @module
 */
import { deliveryComponent, signerComponent, superviseComponent } from "./daemons.ts";
import type { ComponentSpec, MeshRecord } from "./stack.ts";
import { authServiceComponent, authServicePort, readUserAuth } from "./user_auth.ts";

/**
 * The daemons of one space, in start order: delivery, the signer (before the supervisor, which
 * signs every credential through it), the auth service when the root has user auth, and the
 * supervisor. `up` and `space add`/`restore` start exactly these.
 */
export async function spaceDaemons(
  root: string,
  space: string,
  rec: MeshRecord,
): Promise<ComponentSpec[]> {
  const userAuth = await readUserAuth(root);
  // With user auth the auth service comes before the supervisor, which asks it for its agents'
  // bearers from its first spawn on.
  const auth = userAuth ? await authServiceComponent(root, space, rec, userAuth) : undefined;
  return [
    await deliveryComponent(root, space, rec),
    await signerComponent(root, space, rec),
    ...(auth ? [auth] : []),
    await superviseComponent(root, space, rec, rec.isolation, {
      ...(userAuth ? { authService: `127.0.0.1:${await authServicePort(root, space)}` } : {}),
    }),
  ];
}
