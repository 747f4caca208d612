//! The tables a lookup reads: phase 0 of a 16-bit chunk as deduplicated
//! blocks under an index, and each later step's table of class pairs,
//! dense or packed sparse when most of it is empty.

use rustc_hash::FxHashMap as HashMap;

use super::dense_get;

/// Phase 0 of one 16-bit chunk: a class id per value, as `BLOCK`-value blocks
/// (deduplicated) under an index of the value's high bits.
#[derive(Clone, Debug)]
pub(super) struct Chunk16 {
    pub(super) top: Box<[u16]>,
    pub(super) blocks: Box<[u16]>,
}

/// Values of a phase 0 block, as a power of two: blocks of 32 take
/// acl1_1k's phase 0 in 48 KiB, of 256 in 135 KiB, of 64 in 55 KiB, of 16
/// in 62 KiB (the index grows), at the same speed.
const BLOCK_BITS: u32 = 5;
const BLOCK: usize = 1 << BLOCK_BITS;

impl Chunk16 {
    pub(super) fn new(flat: &[u16]) -> Option<Chunk16> {
        let mut top = vec![0u16; flat.len().div_ceil(BLOCK)];
        let mut blocks: Vec<u16> = Vec::new();
        let mut seen: HashMap<&[u16], u16> = HashMap::default();
        for (hi, block) in flat.chunks(BLOCK).enumerate() {
            let next = u16::try_from(seen.len()).ok()?;
            let id = *seen.entry(block).or_insert_with(|| {
                blocks.extend_from_slice(block);
                next
            });
            top[hi] = id;
        }
        Some(Chunk16 {
            top: top.into(),
            blocks: blocks.into(),
        })
    }

    #[inline(always)]
    pub(super) fn get(&self, v: u32) -> usize {
        let v = (v & 0xffff) as usize;
        let b = usize::from(self.top.get(v >> BLOCK_BITS).copied().unwrap_or(0));
        usize::from(
            self.blocks
                .get(b << BLOCK_BITS | (v & (BLOCK - 1)))
                .copied()
                .unwrap_or(0),
        )
    }

    pub(super) fn memory_bytes(&self) -> usize {
        (self.top.len() + self.blocks.len()) * 2
    }
}

/// A table that mostly holds one value, stored by row displacement (Tarjan
/// and Yao, "Storing a Sparse Table", CACM 1979): row `a`'s other cells are
/// placed from `base[a]` on, into slots shared with other rows; a slot holds
/// its row in the high half and the cell in the low half, so cell `(a, b)`
/// is the low half of `slots[base[a] + b]` when its high half is `a`, else
/// `default`.
#[derive(Clone, Debug)]
pub(super) struct Sparse {
    pub(super) base: Box<[u32]>,
    pub(super) slots: Box<[u32]>,
    pub(super) default: u16,
}

/// Tables of fewer cells stay dense.
const MIN_SPARSE: usize = 16 << 10;
/// A slot of no row (rows are below 0xffff).
const FREE: u32 = 0xffff_0000;

impl Sparse {
    /// `cells` (rows of `row`) packed, when most of them hold one value.
    pub(super) fn pack(cells: &[u16], row: usize) -> Option<Sparse> {
        let rows = cells.len() / row.max(1);
        if row == 0 || rows >= 0xffff || cells.is_empty() {
            return None;
        }
        let mut counts: HashMap<u16, usize> = HashMap::default();
        for &c in cells {
            *counts.entry(c).or_insert(0) += 1;
        }
        let (&default, &n) = counts.iter().max_by_key(|&(v, n)| (*n, u16::MAX - *v))?;
        let others = cells.len() - n;
        // Slots for the others (first fit leaves a few holes) and a base
        // per row, against two bytes a cell: packed only where that saves
        // two thirds of a table worth it (a sparse read costs a dependent
        // load more).
        if cells.len() < MIN_SPARSE || (others * 5 + rows * 4) * 3 > cells.len() * 2 {
            return None;
        }
        let entries = |r: usize| {
            (0..row).filter_map(move |c| {
                let v = cells[r * row + c];
                (v != default).then_some((c, v))
            })
        };
        let mut order: Vec<(usize, usize)> = (0..rows).map(|r| (entries(r).count(), r)).collect();
        order.sort_unstable_by(|x, y| y.cmp(x));
        let mut slots: Vec<u32> = vec![FREE; row];
        let mut base = vec![0u32; rows];
        let mut first_free = 0;
        for &(count, r) in &order {
            if count == 0 {
                continue;
            }
            let row_cells: Vec<(usize, u16)> = entries(r).collect();
            let c0 = row_cells[0].0;
            let mut o = first_free.max(c0) - c0;
            while !row_cells
                .iter()
                .all(|&(c, _)| slots.get(o + c).is_none_or(|&s| s == FREE))
            {
                o += 1;
            }
            if slots.len() < o + row {
                slots.resize(o + row, FREE);
            }
            for &(c, v) in &row_cells {
                slots[o + c] = (r as u32) << 16 | u32::from(v);
            }
            base[r] = o as u32;
            while slots.get(first_free).is_some_and(|&s| s != FREE) {
                first_free += 1;
            }
        }
        Some(Sparse {
            base: base.into(),
            slots: slots.into(),
            default,
        })
    }

    #[inline(always)]
    pub(super) fn get(&self, a: usize, b: usize) -> usize {
        let at = self.base.get(a).copied().unwrap_or(0) as usize + b;
        let w = self.slots.get(at).copied().unwrap_or(FREE);
        if (w >> 16) as usize == a {
            (w & 0xffff) as usize
        } else {
            usize::from(self.default)
        }
    }

    pub(super) fn bytes(&self) -> usize {
        (self.base.len() + self.slots.len()) * 4
    }
}

/// One table read: `table[slot a][slot b]` into the next slot, from the
/// dense table (`a · row + b`) or, when there is one, the sparse one.
#[derive(Clone, Debug)]
pub(super) struct Step {
    pub(super) a: u8,
    pub(super) b: u8,
    pub(super) row: usize,
    /// Cells of the table (for reports).
    pub(super) cells: usize,
    pub(super) dense: Box<[u16]>,
    pub(super) sparse: Option<Box<Sparse>>,
}

impl Step {
    #[inline(always)]
    pub(super) fn get(&self, a: usize, b: usize) -> usize {
        match &self.sparse {
            Some(s) => s.get(a, b),
            None => dense_get(&self.dense, self.row, a, b),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.dense.len() * 2 + self.sparse.as_ref().map_or(0, |s| s.bytes())
    }
}
