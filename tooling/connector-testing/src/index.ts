export { type Agentgov, startAgentgov } from "./agentgov.ts"
export { type ConnectorUnderTest, describeConnectorContract, looksRaw, type VendorFake } from "./contract.ts"
export {
  type ChildConnector,
  type FakeAnswer,
  type FakeRequest,
  type HttpFake,
  type InProcess,
  kill9,
  runCommand,
  runInProcess,
  type ScriptedFake,
  sleep,
  spawnConnector,
  startHttpFake,
  startScriptedFake,
  waitFor,
} from "./processes.ts"
export { newSecret, type Rig, useConnectorRig } from "./rig.ts"
