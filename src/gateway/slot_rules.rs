//! The rules by which a bucket shares its slots among the clients that
//! ask: by claims for clients that show one (max-min fair shares, see
//! `slot_claims`), turn by turn for older clients (one slot at a time while
//! anyone waits with none, every chain that ran its length given back).

use super::slot_claims::Share;

/// Who asks for slots, and so by which rules the bucket shares them.
pub(crate) enum SlotAsker {
    /// A client that shows a claim; `share` while the claims heard lately
    /// want more slots than there are.
    Claimed { id: u64, share: Option<Share> },
    /// An older client, which shows none; `contended` while a client
    /// holding no slot waits for one.
    Older { contended: bool },
}

impl SlotAsker {
    /// How many of its chains that ran their length a client holding
    /// `holds` keeps: one with a claim down to its share's `keep` while
    /// others hold less than theirs, and none while an older client waits
    /// with none, as older clients give back every chain while anyone
    /// waits.
    pub fn keeps(&self, holds: u64, unclaimed_waiting: bool) -> u64 {
        match *self {
            SlotAsker::Claimed {
                share: Some(share), ..
            } if share.others_short => share.keep,
            SlotAsker::Claimed { .. } if unclaimed_waiting => 0,
            SlotAsker::Older { contended: true } => 0,
            _ => holds,
        }
    }

    /// How many new slots a client left holding `holding` may take. One
    /// that gave slots back while others want them gets none in the same
    /// request; one with a claim at or over its keep none while another is
    /// under its own, else up to its share; an older client one at a time
    /// while others wait.
    pub fn may_take(&self, holding: u64, wanted: u64, giving_back: bool) -> u64 {
        match *self {
            SlotAsker::Claimed {
                share: Some(share), ..
            } => {
                if giving_back && share.others_short {
                    0
                } else if share.others_under_keep {
                    share.keep.saturating_sub(holding)
                } else {
                    share.most.saturating_sub(holding)
                }
            }
            SlotAsker::Claimed { share: None, .. } => wanted,
            SlotAsker::Older { contended: true } if giving_back => 0,
            SlotAsker::Older { contended: true } => 1,
            SlotAsker::Older { contended: false } => wanted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_AND_A_HALF: Share = Share {
        most: 3,
        keep: 2,
        others_short: true,
        others_under_keep: false,
    };

    #[test]
    fn a_claimed_client_keeps_its_share_while_others_are_short_and_all_it_holds_otherwise() {
        let sharing = SlotAsker::Claimed {
            id: 1,
            share: Some(TWO_AND_A_HALF),
        };
        assert_eq!(sharing.keeps(4, false), 2);
        let alone = SlotAsker::Claimed { id: 1, share: None };
        assert_eq!(alone.keeps(4, false), 4);
        assert_eq!(alone.keeps(4, true), 0, "an older client waits with none");
    }

    #[test]
    fn a_claimed_client_takes_up_to_its_share_but_none_after_giving_back_to_others() {
        let sharing = SlotAsker::Claimed {
            id: 1,
            share: Some(TWO_AND_A_HALF),
        };
        assert_eq!(sharing.may_take(1, 4, false), 2);
        assert_eq!(sharing.may_take(1, 4, true), 0);
        let under = Share {
            others_under_keep: true,
            ..TWO_AND_A_HALF
        };
        let behind = SlotAsker::Claimed {
            id: 1,
            share: Some(under),
        };
        assert_eq!(behind.may_take(1, 4, false), 1, "only up to its keep");
    }

    #[test]
    fn an_older_client_takes_one_slot_at_a_time_while_others_wait() {
        let contended = SlotAsker::Older { contended: true };
        assert_eq!(
            (contended.keeps(3, false), contended.may_take(0, 4, false)),
            (0, 1)
        );
        assert_eq!(contended.may_take(0, 4, true), 0);
        let calm = SlotAsker::Older { contended: false };
        assert_eq!((calm.keeps(3, false), calm.may_take(0, 4, false)), (3, 4));
    }
}
