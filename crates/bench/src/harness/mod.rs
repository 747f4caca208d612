//! What the experiments share: a network namespace with a veth pair
//! ([`netns`]), loads that keep the box busy ([`background`]), programs run beside kansoku and their CPU time and closing
//! lines ([`peers`]), an emulated slow disk ([`slow_disk`]), markdown
//! tables ([`table`]), and medians, MB/s and Shimizu et al. 2006's
//! compressor condition ([`stats`]). Charts are the `plot` crate's.

pub mod background;
pub mod netns;
pub mod peers;
pub mod slow_disk;
pub mod stats;
pub mod table;
