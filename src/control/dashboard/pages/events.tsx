// The events panel of the model and node pages: what the control plane's
// events log (GET /api/v1/events) holds about them, newest first. With no
// events source, or none recorded, it says so; it never invents any.
import { Empty, Panel } from '../components.js';
import type { DashboardEvent } from '../data.js';

export function EventsPanel({ events }: { events: readonly DashboardEvent[] | null }) {
  return (
    <Panel title="Events" id="events">
      {events === null || events.length === 0 ? (
        <Empty>No events recorded.</Empty>
      ) : (
        <table>
          <tbody>
            {events.map((e) => (
              <tr>
                <td>{new Date(e.atMs).toISOString()}</td>
                <td>{e.kind}</td>
                <td>{e.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Panel>
  );
}
