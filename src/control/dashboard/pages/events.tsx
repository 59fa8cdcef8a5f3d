// EVENTS: the place a later change fills from GET /api/v1/events. Until an
// events source is passed to the dashboard, the panel says that no events
// are recorded; it never invents any.
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
