// TCP connections a test opens to a listener and never sends on: the flood
// a connection cap is for. They count how many the server closed, and the
// test destroys what is left when it ends. Kept apart from the process
// helpers so that a unit test of one listener can use it without them.
import { connect, type Socket } from 'node:net';

export class SilentConnections {
  private readonly sockets: Socket[] = [];
  private closedByServer = 0;

  /** Opens `count` connections to 127.0.0.1:`port`, one after another, each once connected. */
  async open(port: number, count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const socket = connect({ host: '127.0.0.1', port });
      this.sockets.push(socket);
      socket.on('error', () => {});
      socket.on('close', () => this.closedByServer++);
      await new Promise((resolve) => socket.once('connect', resolve));
    }
  }

  /** How many of them have closed so far (the server closed them: the test destroys them only at the end). */
  get closed(): number {
    return this.closedByServer;
  }

  /** Closes every one still open; for the test's afterEach. */
  destroyAll(): void {
    // Not counted: the server did not close these.
    for (const s of this.sockets.splice(0)) s.removeAllListeners('close').destroy();
    this.closedByServer = 0;
  }
}
