//! Celery's queues on kombu's Redis transport: listing by kombu's binding tables, figures,
//! browse, the message envelope, and remote control through the pidbox.

pub mod browse;
pub mod envelope;
pub mod figures;
pub mod listing;
pub mod pidbox;
