import { aclsOf, BRIDGE_ACLS, BRIDGE_ROLE, deviceAcls, deviceRoleName, isAlreadyExists, isNotFound, rolesOf, sameAcls, type DynsecAcl, type DynsecCommand, type DynsecResponse } from '../domain/dynsec';
import type { Product, TopicRoots } from '../domain/topics';
import { BrokerError, type ControlConnection } from './control';

function expectOk(responses: DynsecResponse[], tolerate: (r: DynsecResponse) => boolean = () => false): void {
  for (const r of responses) {
    if (r.error && !tolerate(r)) throw new BrokerError(`${r.command}: ${r.error}`);
  }
}

/** Device credentials and ACLs in the dynamic-security plugin. */
export class DeviceCredentials {
  constructor(
    private readonly control: ControlConnection,
    private readonly roots: TopicRoots,
  ) {}

  /**
   * Creates or replaces the device's client (username = client id = device id, this
   * password) and its role `device-<id>` limited to <root>/<id>/#. Idempotent.
   */
  async upsert(deviceId: string, product: Product, password: string): Promise<void> {
    const rolename = deviceRoleName(deviceId);
    const acls = deviceAcls(this.roots, product, deviceId);
    // The common case (a new device) in one round trip; what already exists is brought in line after.
    const [role, client] = await this.control.dynsec([
      { command: 'createRole', rolename, acls },
      { command: 'createClient', username: deviceId, clientid: deviceId, password, roles: [{ rolename }] },
    ]);
    if (!role || !client) throw new BrokerError('no answer to createRole/createClient');
    if (role.error && !isAlreadyExists(role)) throw new BrokerError(`createRole: ${role.error}`);
    if (client.error && !isAlreadyExists(client)) throw new BrokerError(`createClient: ${client.error}`);
    if (role.error) await this.alignRole(rolename, acls);
    if (!client.error) return;
    expectOk(
      await this.control.dynsec([
        { command: 'setClientPassword', username: deviceId, password },
        { command: 'setClientId', username: deviceId, clientid: deviceId },
      ]),
    );
    await this.ensureClientRole(deviceId, rolename);
  }

  /** An existing role gets exactly these ACLs (the device may have changed product). */
  private async alignRole(rolename: string, acls: DynsecAcl[]): Promise<void> {
    const [role] = await this.control.dynsec([{ command: 'getRole', rolename }]);
    if (!role) throw new BrokerError('no answer to getRole');
    if (role.error) throw new BrokerError(`getRole: ${role.error}`);
    if (sameAcls(aclsOf(role.data), acls)) return;
    const commands: DynsecCommand[] = [
      ...aclsOf(role.data).map((a) => ({ command: 'removeRoleACL', rolename, acltype: a.acltype, topic: a.topic })),
      ...acls.map((a) => ({ command: 'addRoleACL', rolename, ...a })),
    ];
    expectOk(await this.control.dynsec(commands), isNotFound);
  }

  /** addClientRole for a role the client holds already is an "Internal error" in 2.0.11: look first. */
  private async ensureClientRole(username: string, rolename: string): Promise<void> {
    const [client] = await this.control.dynsec([{ command: 'getClient', username }]);
    if (!client) throw new BrokerError('no answer to getClient');
    if (client.error) throw new BrokerError(`getClient: ${client.error}`);
    if (rolesOf(client.data).includes(rolename)) return;
    expectOk(await this.control.dynsec([{ command: 'addClientRole', username, rolename }]));
  }

  /** Deletes the device's client (the broker disconnects it) and its role; missing ones are fine. */
  async remove(deviceId: string): Promise<void> {
    const responses = await this.control.dynsec([
      { command: 'deleteClient', username: deviceId },
      { command: 'deleteRole', rolename: deviceRoleName(deviceId) },
    ]);
    expectOk(responses, isNotFound);
  }

  /** Makes sure the bridge's own client holds the role it needs for shared subscriptions and publishing. */
  async ensureBridgeRole(username: string): Promise<void> {
    const [role] = await this.control.dynsec([{ command: 'getRole', rolename: BRIDGE_ROLE }]);
    if (!role) throw new BrokerError('no answer to getRole');
    if (isNotFound(role)) {
      expectOk(await this.control.dynsec([{ command: 'createRole', rolename: BRIDGE_ROLE, acls: BRIDGE_ACLS }]), isAlreadyExists);
    } else if (role.error) {
      throw new BrokerError(`getRole: ${role.error}`);
    } else {
      const have = aclsOf(role.data);
      const missing = BRIDGE_ACLS.filter((a) => !have.some((h) => h.acltype === a.acltype && h.topic === a.topic && h.allow));
      if (missing.length > 0) expectOk(await this.control.dynsec(missing.map((a) => ({ command: 'addRoleACL', rolename: BRIDGE_ROLE, ...a }))), isAlreadyExists);
    }
    await this.ensureClientRole(username, BRIDGE_ROLE);
  }
}
