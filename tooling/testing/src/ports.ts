import { type AddressInfo, createServer } from "node:net"

/** A TCP port on 127.0.0.1 that was free a moment ago (the OS's choice), for a server a test starts itself. */
export const freePort = async (): Promise<number> => {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
