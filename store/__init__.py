"""assetcast store package: the event log, its leases and schema administration."""

from store.event_store import EventStore
from store.leases import Lease, LeaseLost
from store.memory import InMemoryEventStore
from store.records import LeaseInfo, NewEvent, RecordedEvent, RunSummary

__all__ = [
    "EventStore", "InMemoryEventStore", "Lease", "LeaseInfo", "LeaseLost", "NewEvent",
    "RecordedEvent", "RunSummary",
]
